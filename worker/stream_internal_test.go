package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// lineLog records the messages logged.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *lineLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Message)
	return nil
}
func (l *lineLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lineLog) WithGroup(string) slog.Handler      { return l }

// TestStreamSplitsLongLinesWithoutEmptyOnes: an output line of
// maxLogLine bytes or more is logged in parts, and the end of the line
// after a part is not logged as an empty line of its own.
func TestStreamSplitsLongLinesWithoutEmptyOnes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  []int // the lengths of the lines logged, without the prefix
	}{
		{"exactly the limit", strings.Repeat("x", maxLogLine) + "\nnext\n", []int{maxLogLine, 4}},
		{"over the limit", strings.Repeat("x", maxLogLine+10) + "\nnext\n", []int{maxLogLine, 10, 4}},
		// A tail that ends on the reader's 8 KiB boundary.
		{"over the limit by 8 KiB", strings.Repeat("x", maxLogLine+8<<10) + "\nnext\n", []int{maxLogLine, 8 << 10, 4}},
		{"over the limit by 16 KiB", strings.Repeat("x", maxLogLine+16<<10) + "\nnext\n", []int{maxLogLine, 16 << 10, 4}},
		{"an empty line kept", "a\n\nb\n", []int{1, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &lineLog{}
			var s Shell
			s.stream(bytes.NewBufferString(tt.input), "stdout", "> ", slog.New(h), &tailBuffer{maxLines: 10, maxBytes: 1 << 10})
			var got []int
			for _, l := range h.lines {
				got = append(got, len(strings.TrimPrefix(l, "> ")))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("logged lines of lengths %v; want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("logged lines of lengths %v; want %v", got, tt.want)
				}
			}
		})
	}
}
