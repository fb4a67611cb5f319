package redact_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jobq/jobq/internal/redact"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"postgres://u:PW@h/db?queue=q", "postgres://u:xxxxx@h/db?queue=q"},
		{"postgres//u:PW@h/db", "postgres//u:xxxxx@h/db"},
		{"redis:/:PW@h:6379/0", "redis:/:xxxxx@h:6379/0"},
		{"rediss://:p@ss@h/0", "rediss://:xxxxx@h/0"},
		// A raw '/' in the password: the URL does not parse.
		{`open "postgres://u:pa/ss@h/db": invalid port`, `open "postgres://u:xxxxx@h/db": invalid port`},
		{`unknown command "postgres://u:PW@h/db" for "jobq size"`, `unknown command "postgres://u:xxxxx@h/db" for "jobq size"`},
		{"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=K3y==;EndpointSuffix=core.windows.net",
			"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=xxxxx;EndpointSuffix=core.windows.net"},
		{"QueueEndpoint=https://a.queue.core.windows.net/?sv=2022-11-02&ss=q&sig=S1G%3D;AccountName=a",
			"QueueEndpoint=https://a.queue.core.windows.net/?sv=2022-11-02&ss=q&sig=xxxxx;AccountName=a"},
		{"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=abc=",
			"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=xxxxx"},
		{"host=h user=u password=PW dbname=d", "host=h user=u password=xxxxx dbname=d"},
		{"conn_str=AccountKey%3DK3y", "conn_str=xxxxx"},
		{"export AWS_SECRET_ACCESS_KEY=abc HF_TOKEN=def", "export AWS_SECRET_ACCESS_KEY=xxxxx HF_TOKEN=xxxxx"},
		// A container URL with a SAS, URL-encoded inside a queue URL's results=.
		{"sb://ns/q?results=https%3A%2F%2Fa.blob.core.windows.net%2Fc%3Fsv%3D2021%26sig%3DS1G%252B%253D%26se%3D1&create=true",
			"sb://ns/q?results=https%3A%2F%2Fa.blob.core.windows.net%2Fc%3Fsv%3D2021%26sig%3Dxxxxx%26se%3D1&create=true"},
		{"x%3Fsig%3DS%3Bkey%3DK", "x%3Fsig%3Dxxxxx%3Bkey%3Dxxxxx"},
		// Left alone: no credential.
		{"redis://127.0.0.1:6379/0?queue=q", "redis://127.0.0.1:6379/0?queue=q"},
		{"sqlite://./work.db?queue=default&poll=1s", "sqlite://./work.db?queue=default&poll=1s"},
		{"user@host:5432/db", "user@host:5432/db"},
		{"[::1]:6379 max_tokens_used", "[::1]:6379 max_tokens_used"},
		{`-e "NOEQUALS": expected KEY=VALUE`, `-e "NOEQUALS": expected KEY=VALUE`},
		{"?key=k1&Sig=s1&pwd=p1", "?key=xxxxx&Sig=xxxxx&pwd=xxxxx"},
		// The placeholder of a hint stays; a password of dots does not.
		{"expected AccountName=...;AccountKey=...", "expected AccountName=...;AccountKey=..."},
		{"?password=....&q=1", "?password=xxxxx&q=1"},
	}
	for _, tt := range tests {
		if got := redact.String(tt.in); got != tt.want {
			t.Errorf("Redact(%q)\n got  %q\n want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"postgres://u:PW@h/db?queue=q&password=P2", "postgres://u:xxxxx@h/db?queue=q&password=xxxxx"},
		// Typos that parse as paths, or not at all, are redacted as text.
		{"postgres//u:PW@h/db", "postgres//u:xxxxx@h/db"},
		{"redis:/:PW@h", "redis:/:xxxxx@h"},
		{"postgres://u:PW@h:bad port/db", "postgres://u:xxxxx@h:bad port/db"},
		{"azqueue://acct/q?sv=1&sig=S", "azqueue://acct/q?sv=1&sig=xxxxx"},
		// A query value may hold a space, comma or quote; a name may be
		// escaped.
		{"postgres://h/db?password=ab,cd&queue=q", "postgres://h/db?password=xxxxx&queue=q"},
		{"postgres://h/db?sslpassword=a b'c\"d", "postgres://h/db?sslpassword=xxxxx"},
		{"postgres://h/db?pass%77ord=secret", "postgres://h/db?pass%77ord=xxxxx"},
		{"postgres://h/db?password=...", "postgres://h/db?password=..."},
	}
	for _, tt := range tests {
		if got := redact.URL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q)\n got  %q\n want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzRedactURL builds queue URLs of each scheme with a password in the
// user-info and in a secret query parameter, and checks that no redaction
// shows the password: RedactURL on the URL, Redact on a message quoting
// it, and RedactConnectionString on a connection string holding it.
func FuzzRedactURL(f *testing.F) {
	f.Add("postgres", "u", "PW", "h", "queue=q")
	f.Add("redis", "", "s3cret", "127.0.0.1:6379", "")
	f.Add("rediss", "default", "p@ss/wo:rd", "h", "db=1")
	f.Add("sqlite", "", "x y", ".", "queue=a")
	f.Add("azqueue", "acct", "K3y==", "acct", "sv=1&sig=S")
	f.Add("sb", "root", "abc", "ns", "lock_duration=1m")
	f.Fuzz(func(t *testing.T, scheme, user, password, host, query string) {
		if len(password) < 4 || strings.Contains(password, "xxxxx") || strings.Contains("xxxxx", password) {
			return // too short to tell from the rest of the text, or part of the mask
		}
		u := &url.URL{Scheme: scheme, User: url.UserPassword(user, password), Host: host, Path: "/q", RawQuery: query}
		s := u.String()
		// What the password looks like in the URL, and whether it shows
		// anywhere else in it anyway (then its presence proves nothing).
		enc := strings.TrimPrefix(url.UserPassword("", password).String(), ":")
		without := strings.Replace(s, ":"+enc+"@", ":@", 1)
		if strings.Contains(without, enc) || !strings.Contains(s, enc) {
			return
		}
		for _, r := range []func(string) string{
			redact.URL,
			func(s string) string { return redact.String(`cannot open "` + s + `": refused`) },
			func(s string) string { return redact.String("unknown command " + s) },
		} {
			// Redacting may re-encode the rest of the URL (a space as
			// %20), which can spell the password by chance: then, as
			// for the URL without it, its presence proves nothing.
			if got := r(s); strings.Contains(got, enc) && !strings.Contains(r(without), enc) {
				t.Fatalf("redacted %q still shows the password %q: %q", s, enc, got)
			}
		}
		// As a query parameter typed as it is (a comma or a quote needs no
		// escape there), which a backend reads as the password.
		raw := scheme + "://h/q?password=" + password
		if pu, err := url.Parse(raw); err == nil && len(pu.Query()) == 1 && pu.Query().Get("password") == password {
			placeholder := strings.Repeat("~", len(password))
			if got := redact.URL(raw); strings.Contains(got, password) && !strings.Contains(redact.URL(scheme+"://h/q?password="+placeholder), password) {
				t.Fatalf("redacted %q still shows the password %q: %q", raw, password, got)
			}
		}
		// As a query parameter and in a connection string.
		q := url.Values{"password": {password}}.Encode()
		qs := strings.TrimPrefix(q, "password=")
		if len(qs) >= 4 && !strings.ContainsAny(password, "&;\"', \t\n\r\v\f") {
			redactions := func(pw, qs string) []string {
				return []string{
					redact.URL(scheme + "://h/q?password=" + qs),
					redact.String("AccountName=a;AccountKey=" + pw + ";EndpointSuffix=x"),
					redact.String("QueueEndpoint=https://a/?sv=1&sig=" + qs + ";AccountName=a"),
				}
			}
			// The same texts with a placeholder for the password: where
			// one shows the password anyway (the rest re-encoded, a
			// scheme's space as %20 before "00" spelling "2000"), its
			// presence proves nothing.
			placeholder := strings.Repeat("~", len(password))
			bare := redactions(placeholder, placeholder)
			for i, got := range redactions(password, qs) {
				shows := func(s string) bool { return strings.Contains(s, password) || strings.Contains(s, qs) }
				if shows(got) && !shows(bare[i]) {
					t.Fatalf("redaction %q still shows the password %q", got, password)
				}
			}
		}
	})
}

// FuzzRedact runs Redact on any text: it must not panic, must leave text
// without '@', '=' or '%' alone, and redacting twice changes nothing more.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"postgres://u:PW@h/db", "redis:/:PW@h", "a:b@c:d@e/f", "AccountKey=k;SharedAccessKey=s", "x%3Dy&sig%3dz",
		"password=", "=", ":@", "key=a=b", "QueueEndpoint=https://a/?sv=1&sig=S;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := redact.String(s)
		if !strings.ContainsAny(s, "@=%") && got != s {
			t.Fatalf("Redact(%q) = %q; it has nothing to redact", s, got)
		}
		if again := redact.String(got); again != got {
			t.Fatalf("Redact is not stable: %q -> %q -> %q", s, got, again)
		}
	})
}
