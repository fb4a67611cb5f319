package tcpfault

import (
	"net"
	"net/url"
	"testing"
)

func TestForTestKeepsTheProxiedConnectionPlain(t *testing.T) {
	t.Parallel()
	engine, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	host := engine.Addr().String()
	tests := []struct {
		name, url string
		skipped   bool
		sslmode   string // of both URLs, when not skipped
	}{
		{"postgres without sslmode", "postgres://u@" + host + "/db", false, "disable"},
		{"postgres with sslmode=disable", "postgres://u@" + host + "/db?sslmode=disable", false, "disable"},
		{"postgres with sslmode=require", "postgres://u@" + host + "/db?sslmode=require", true, ""},
		{"postgresql with sslmode=prefer", "postgresql://u@" + host + "/db?sslmode=prefer", true, ""},
		{"redis", "redis://" + host + "/0", false, ""},
		{"rediss", "rediss://" + host + "/0", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var proxied, direct string
			ok := t.Run("open", func(t *testing.T) {
				_, proxied, direct = ForTest(t, "JOBQ_TCPFAULT_TEST_UNSET", tt.url, nil)
			})
			if !ok {
				t.Fatal("ForTest failed")
			}
			if skipped := proxied == ""; skipped != tt.skipped {
				t.Fatalf("ForTest(%s) skipped: %v; want %v", tt.url, skipped, tt.skipped)
			}
			for _, s := range []string{proxied, direct} {
				if s == "" {
					continue
				}
				u, err := url.Parse(s)
				if err != nil {
					t.Fatal(err)
				}
				if got := u.Query().Get("sslmode"); got != tt.sslmode {
					t.Errorf("%s: sslmode=%q; want %q", s, got, tt.sslmode)
				}
				if u.Query().Get("queue") == "" {
					t.Errorf("%s names no queue", s)
				}
			}
		})
	}
}
