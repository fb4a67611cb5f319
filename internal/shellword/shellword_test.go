package shellword

import (
	"os/exec"
	"testing"
)

func TestQuote(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"sqlite://./w.db", "sqlite://./w.db"},
		{"sqlite://./w.db?queue=a&x=1", "'sqlite://./w.db?queue=a&x=1'"},
		{"it's", `'it'\''s'`},
		{"", "''"},
		{"a b", "'a b'"},
		{"$HOME", "'$HOME'"},
	}
	bash, err := exec.LookPath("bash")
	for _, tt := range tests {
		got := Quote(tt.in)
		if got != tt.want {
			t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if err != nil {
			continue
		}
		// bash reads the quoted word back as the original string.
		out, err := exec.Command(bash, "-c", "printf %s "+got).Output()
		if err != nil || string(out) != tt.in {
			t.Errorf("bash reads %s as %q (%v), want %q", got, out, err, tt.in)
		}
	}
}
