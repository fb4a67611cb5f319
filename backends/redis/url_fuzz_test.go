package redis

import (
	"net/url"
	"testing"

	"github.com/jobq/jobq/tools/testkit/urlfuzz"
)

// FuzzParseURL: any redis:// URL parses or fails without a panic, and
// neither the redacted URL nor the redacted error shows its password.
func FuzzParseURL(f *testing.F) {
	for _, s := range urlfuzz.Seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Add("", "s3cret", "h", "/-1", "db=99999&pool_size=99999999999999&dial_timeout=1e10&cluster=true")
	f.Fuzz(func(t *testing.T, user, password, host, path, query string) {
		urlfuzz.Check(t, "redis", user, password, host, path, query, func(u *url.URL) error {
			_, err := parseURL(u)
			return err
		})
	})
}
