package shellword

import (
	"os/exec"
	"strings"
	"testing"
)

// FuzzQuote: bash reads any quoted string back, as one word, as the
// string itself. Strings holding a NUL byte are left out: no bash word
// (nor command line argument) can hold one.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"plain", "", "it's", "a b", "$HOME", "`id`", "~", "a=~", "{a,b}", "*", "!x", "\\", "'", "\n", "\xff\xfe", "-n", "--x=y", "%1", "@(a)", "a,b"} {
		f.Add(s)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		f.Skip("no bash to read the words back")
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return
		}
		q := Quote(s)
		// Two words, to see that the quoted one stays one word: bash
		// prints each between brackets.
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", "printf '[%s]' "+q+" end").Output()
		if want := "[" + s + "][end]"; err != nil || string(out) != want {
			t.Fatalf("Quote(%q) = %s, which bash reads as %q (%v); want %q", s, q, out, err, want)
		}
	})
}
