package worker

import (
	"strings"
	"testing"
)

func TestTailBufferBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		maxLines, maxBytes int
		lines              []string
		want               string
	}{
		{"fits", 3, 100, []string{"a", "b"}, "a\nb"},
		{"line bound", 2, 100, []string{"a", "b", "c"}, "[...]\nb\nc"},
		{"byte bound", 10, 6, []string{"aa", "bb", "cc"}, "[...]\nbb\ncc"},
		{"one long line is kept, cut", 10, 10, []string{strings.Repeat("x", 3000)}, strings.Repeat("x", maxTailLine) + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var tb tailBuffer
			tb.init(tt.maxLines, tt.maxBytes)
			for _, l := range tt.lines {
				tb.add(l)
			}
			if got := tb.String(); got != tt.want {
				t.Fatalf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	t.Parallel()
	var got []string
	w := &lineWriter{fn: func(s string) { got = append(got, s) }}
	for _, chunk := range []string{"ab", "c\nde\r\n", "f"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	w.flush()
	if strings.Join(got, "|") != "abc|de|f" {
		t.Fatalf("lines %q", got)
	}
}
