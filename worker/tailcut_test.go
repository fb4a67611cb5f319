package worker_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/worker"
)

// TestLongOutputLineKeepsWholeCharacters: a line of valid UTF-8 too long
// for the kept output is cut before a character that would not fit whole.
// It used to be cut inside it, and the stored output then showed U+FFFD
// and a note that the task printed invalid UTF-8.
func TestLongOutputLineKeepsWholeCharacters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		pad  int    // ASCII bytes before the character: the cut (2,048 bytes) falls inside it
		char string // a character of 2, 3 or 4 bytes
	}{
		{"two-byte character", 2047, "é"},
		{"three-byte character", 2046, "€"},
		{"four-byte character", 2045, "😀"},
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		for i, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				q := engines.Open(t, engines.URLs(t, "tailcut"+strconv.Itoa(i))[engine])
				line := strings.Repeat("a", tt.pad) + tt.char + "tail"
				id := pushOne(t, q, &jobq.Task{Command: "printf '%s\\n' '" + line + "'; exit 1"})
				w := worker.New(q, worker.NewShell(), worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
				if err := w.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				out := result(t, q, id).Output
				if strings.Contains(out, "\uFFFD") || strings.Contains(out, "invalid UTF-8") || !strings.HasPrefix(out, strings.Repeat("a", tt.pad)) {
					t.Fatalf("stored output ends %q; want the line cut before the character, without replacement", out[max(0, len(out)-80):])
				}
			})
		}
	}
}
