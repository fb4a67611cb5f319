package worker

import (
	"bytes"
	"strings"
	"sync"
	"unicode/utf8"
)

// tailBuffer keeps the last lines of a task's output, bounded both in lines
// and in bytes, for the dead-letter detail.
type tailBuffer struct {
	mu       sync.Mutex
	lines    []string
	size     int
	maxLines int
	maxBytes int
	dropped  bool
}

const maxTailLine = 2048 // longer lines are cut so one line cannot fill the tail

func (t *tailBuffer) init(maxLines, maxBytes int) {
	t.maxLines, t.maxBytes = maxLines, maxBytes
}

func (t *tailBuffer) add(line string) {
	if len(line) > maxTailLine {
		// Cut before a character that would not fit whole: half a
		// character would read as invalid UTF-8 in the stored output.
		n := maxTailLine
		for n > maxTailLine-utf8.UTFMax && !utf8.RuneStart(line[n]) {
			n--
		}
		line = line[:n] + "..."
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.size += len(line) + 1
	for len(t.lines) > t.maxLines || (t.size > t.maxBytes && len(t.lines) > 1) {
		t.size -= len(t.lines[0]) + 1
		t.lines[0] = ""
		t.lines = t.lines[1:]
		t.dropped = true
	}
}

// String returns the kept lines, marked when earlier ones were dropped.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(t.lines, "\n")
	if t.dropped {
		s = "[...]\n" + s
	}
	return s
}

// lineWriter is an io.Writer that calls fn for each complete line.
type lineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.fn(strings.TrimSuffix(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 {
		w.fn(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// flush emits a final line without a newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.fn(strings.TrimSuffix(string(w.buf), "\r"))
		w.buf = w.buf[:0]
	}
}
