package sqlite

import (
	"net/url"
	"testing"

	"github.com/jobq/jobq/tools/testkit/urlfuzz"
)

// FuzzParseURL: any sqlite:// URL parses or fails without a panic, and
// neither the redacted URL nor the redacted error shows its password.
func FuzzParseURL(f *testing.F) {
	for _, s := range urlfuzz.Seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Add("", "s3cret", ".", "/a%3Fb.db", "max_message_bytes=99999999999999999999&synchronous=FULL")
	f.Fuzz(func(t *testing.T, user, password, host, path, query string) {
		urlfuzz.Check(t, "sqlite", user, password, host, path, query, func(u *url.URL) error {
			_, err := parseURL(u)
			return err
		})
	})
}
