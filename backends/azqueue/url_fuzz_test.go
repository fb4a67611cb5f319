package azqueue

import (
	"net/url"
	"testing"

	"github.com/jobq/jobq/tools/testkit/urlfuzz"
)

// FuzzParseURL: any azqueue:// URL parses or fails without a panic, and
// neither the redacted URL nor the redacted error shows its password.
func FuzzParseURL(f *testing.F) {
	for _, s := range urlfuzz.Seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Add("acct", "K3y==", "acct", "/myqueue", "poll_min=1ms&poll_max=1w&endpoint=http://u:p@h")
	f.Fuzz(func(t *testing.T, user, password, host, path, query string) {
		urlfuzz.Check(t, "azqueue", user, password, host, path, query, func(u *url.URL) error {
			_, err := parseURL(u)
			return err
		})
	})
}
