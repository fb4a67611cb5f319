package redis

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
)

// TestEvictionPolicyWarns opens a queue on a server with each kind of
// maxmemory-policy: one that may delete any key (a lost task) or keys with
// a time-to-live must be warned about when the queue opens, naming the fix;
// noeviction must not.
func TestEvictionPolicyWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own redis-server")
	}
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		policy, want string // want is "" when nothing must be logged
	}{
		{"allkeys-lru", "each deleted key of a queue is a lost task"},
		{"allkeys-random", "each deleted key of a queue is a lost task"},
		{"volatile-ttl", "result records and rate-limit windows may vanish early"},
		{"noeviction", ""},
	} {
		// Not parallel: the subtests share the server's setting.
		t.Run(tc.policy, func(t *testing.T) {
			if err := srv.client().ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(newQueueURL(t, srv.url()))
			if err != nil {
				t.Fatal(err)
			}
			var logs syncbuf.Buffer
			d, err := (&Opener{}).Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			got := logs.String()
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("logged with maxmemory-policy %s: %s", tc.policy, got)
			case tc.want != "" && (!strings.Contains(got, tc.want) || !strings.Contains(got, "maxmemory-policy noeviction")):
				t.Fatalf("logged with maxmemory-policy %s: %q; want a warning saying %q and naming noeviction", tc.policy, got, tc.want)
			}
		})
	}
}
