package postgres

import (
	"net/url"
	"testing"

	"github.com/jobq/jobq/tools/testkit/urlfuzz"
)

// FuzzParseURL: any postgres:// URL parses or fails without a panic, and
// neither the redacted URL nor the redacted error shows its password.
func FuzzParseURL(f *testing.F) {
	for _, s := range urlfuzz.Seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Add("u", "PW0rd", "h", "/db", "pool_max_conns=99999999999&options=-c%20x%3D1&sslpassword=zz")
	f.Fuzz(func(t *testing.T, user, password, host, path, query string) {
		urlfuzz.Check(t, "postgres", user, password, host, path, query, func(u *url.URL) error {
			_, err := parseURL(u)
			return err
		})
	})
}
