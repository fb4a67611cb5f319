package jobq

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSettleText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in  string
		limit     int
		keepEnd   bool
		want      string // exact result, or a prefix when wantNote is set
		wantNote  string
		unchanged bool
	}{
		{name: "plain", in: "exit 1: boom", limit: 100, unchanged: true},
		{name: "valid multibyte", in: "日本語 🚀", limit: 100, unchanged: true},
		{name: "NUL", in: "a\x00b", limit: 100, want: "a\uFFFDb", wantNote: "1 NUL or invalid"},
		{name: "invalid byte", in: "\xff\n", limit: 100, want: "\uFFFD\n", wantNote: "1 NUL or invalid"},
		{name: "cut inside a character", in: "ab日本", limit: 4, want: "ab", wantNote: "first 4 bytes kept"},
		{name: "tail cut inside a character", in: "日本ab", limit: 4, keepEnd: true, want: "ab", wantNote: "last 4 bytes kept"},
		{name: "cut and invalid", in: "\xffabcdef", limit: 3, want: "\uFFFDab", wantNote: "first 3 bytes kept"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := settleText(tt.in, tt.limit, tt.keepEnd)
			if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
				t.Fatalf("settleText(%q) = %q: not valid UTF-8 without NUL", tt.in, got)
			}
			if tt.unchanged {
				if got != tt.in {
					t.Errorf("settleText(%q) = %q, want it unchanged", tt.in, got)
				}
				return
			}
			if !strings.HasPrefix(got, tt.want+" [jobq: ") || !strings.Contains(got, tt.wantNote) {
				t.Errorf("settleText(%q, %d) = %q, want %q followed by a note containing %q", tt.in, tt.limit, got, tt.want, tt.wantNote)
			}
		})
	}
}

func TestTruncateCutsOnCharacterBoundary(t *testing.T) {
	t.Parallel()
	for n := 0; n <= 7; n++ {
		got := truncate("日本語", n)
		if !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q: cut inside a character", "日本語", n, got)
		}
	}
}

func TestStorableID(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"canonical", "0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"},
		{"valid multibyte", "任务-1", "任务-1"},
		{"invalid byte", "key\xbe-key", `key\xbe-key`},
		{"NUL", "a\x00b", `a\x00b`},
		{"truncated character", "ab\xe6\x97", `ab\xe6\x97`},
		{"invalid beside valid", "日\xff本", `日\xff本`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := storableID(tt.in); got != tt.want {
				t.Errorf("storableID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
