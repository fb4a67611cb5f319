package queueurl

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzNormalize: any queue argument normalizes without a panic, trimmed of
// surrounding space; normalizing again changes nothing; and only
// ai4s-jobq's account/queue form becomes an azqueue URL, whose host is the
// account and whose path is the queue.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"myaccount/myqueue", " myaccount/my-queue\n", "sqlite://./q.db?queue=a", "MyAccount/queue",
		"ab/queue", "./local/dir", "acc/q/extra", "abc/-q", "abc/q\x00", "", "azqueue://abc/q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Normalize(s)
		if got != strings.TrimSpace(got) {
			t.Fatalf("Normalize(%q) = %q, not trimmed", s, got)
		}
		if again := Normalize(got); again != got {
			t.Fatalf("Normalize is not stable: %q -> %q -> %q", s, got, again)
		}
		bare := strings.TrimSpace(s)
		if got == bare {
			return
		}
		if strings.Contains(bare, "://") || got != "azqueue://"+bare {
			t.Fatalf("Normalize(%q) = %q; only account/queue may change", s, got)
		}
		u, err := url.Parse(got)
		account, queue, _ := strings.Cut(bare, "/")
		if err != nil || u.Scheme != "azqueue" || u.Host != account || u.Path != "/"+queue || u.RawQuery != "" || u.User != nil {
			t.Fatalf("Normalize(%q) = %q, which parses as %#v, %v; want account %q, queue %q", s, got, u, err, account, queue)
		}
	})
}
