// Package urlfuzz is the body of the backends' URL-parsing fuzz targets:
// a queue URL built from fuzzed parts must parse or fail without a panic,
// and neither the redacted URL nor the redacted error may show the
// password.
package urlfuzz

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/redact"
)

// Seeds are starting parts (user, password, host, path, query) for
// f.Add; each backend adds its own as well.
var Seeds = [][5]string{
	{"u", "PW0rd", "h", "/db", "queue=q"},
	{"", "s3cret", "127.0.0.1:6379", "/0", "queue=a&max_message_bytes=1e10"},
	{"user", "p@ss/wo:rd", "[::1]:5432", "/x", "poll=NaN&spin=-1s"},
	{"a", "xyzzy", "", "./work.db", "queue=%00&busy_timeout=15251w"},
	{"root", "K3y==", "ns", "/q", "retries=4294967296&lock_duration=1d"},
	// Queue names no backend may accept (see driver.CheckQueueName).
	{"u", "PW0rd", "h", "/0", "queue=%00nul"},
	{"u", "PW0rd", "h", "/0", "queue=%ff"},
	{"u", "PW0rd", "h", "/%00nul", "queue=a%1bb"},
}

// Check builds SCHEME://USER:PASSWORD@HOST/PATH?QUERY, parses it with
// parse, and fails t on a panic (by letting it through), when a URL whose
// queue= parameter driver.CheckQueueName refuses parses, or when the
// password shows in RedactURL's output or in the redacted error.
func Check(t *testing.T, scheme, user, password, host, path, query string, parse func(*url.URL) error) {
	t.Helper()
	u := &url.URL{Scheme: scheme, User: url.UserPassword(user, password), Host: host, Path: path, RawQuery: query}
	s := u.String()
	parsed, err := url.Parse(s)
	if err != nil {
		return // not a URL a user could give
	}
	perr := parse(parsed)
	if q, qerr := url.ParseQuery(parsed.RawQuery); perr == nil && qerr == nil && q.Has("queue") {
		if err := driver.CheckQueueName("queue", q.Get("queue")); err != nil {
			t.Fatalf("%q parsed, but its queue name is refused: %v", s, err)
		}
	}
	// What the password looks like in the URL; when it shows elsewhere in
	// the URL as well (or is too short to tell apart), its presence in
	// the output proves nothing.
	enc := strings.TrimPrefix(url.UserPassword("", password).String(), ":")
	if len(password) < 4 || strings.Contains(password, "xxxxx") {
		return
	}
	rest := strings.Replace(s, ":"+enc+"@", ":@", 1)
	if strings.Contains(rest, enc) || strings.Contains(rest, password) {
		return
	}
	// Redaction re-encodes the rest of the URL ("# 000" becomes
	// "#%20000"), which can spell the password by chance: what the same
	// URL with another password redacts to is the baseline.
	other := *u
	other.User = url.UserPassword(user, "zqzqzqzq")
	if strings.Contains(redact.URL(other.String()), enc) {
		return
	}
	if got := redact.URL(s); strings.Contains(got, enc) {
		t.Fatalf("RedactURL(%q) = %q shows the password", s, got)
	}
	if perr != nil {
		if operr := parse(mustParse(other.String())); operr != nil && strings.Contains(redact.String(operr.Error()), enc) {
			return
		}
		if got := redact.String(perr.Error()); strings.Contains(got, enc) {
			t.Fatalf("parsing %q: the redacted error %q shows the password", s, got)
		}
	}
}

// mustParse parses a URL built from one that parsed already.
func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		return &url.URL{}
	}
	return u
}
