package postgres_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jobq/jobq"
)

// TestConnectErrorIsOneLine: a connect that fails (a role the server does
// not have, a port nothing listens on) is one line naming the cause once.
// pgconn's text has a line per address and TLS mode tried, with
// sslmode=prefer the same failure twice, and the CLI printed it as it was.
func TestConnectErrorIsOneLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(u *url.URL)
		want string
	}{
		{"unknown role", func(u *url.URL) { u.User = url.User("hd_no_such_role") }, `role "hd_no_such_role" does not exist`},
		{"closed port", func(u *url.URL) { u.Host = "127.0.0.1:1" }, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(queueURL(t, nil))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("sslmode", "prefer") // TLS first, then plain: two attempts
			u.RawQuery = q.Encode()
			tt.edit(u)
			qu, err := jobq.Open(t.Context(), u.String())
			if err == nil {
				qu.Close()
				t.Fatalf("open of %s succeeded; want a connect error", tt.name)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || strings.Count(msg, tt.want) != 1 {
				t.Errorf("open: %q; want one line naming %q once", msg, tt.want)
			}
		})
	}
}
