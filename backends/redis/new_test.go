package redis

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// userClient is a client the test builds itself, as an application would.
func userClient(t *testing.T) goredis.UniversalClient {
	t.Helper()
	// go-redis refuses jobq's own parameters (prefix=) in a URL.
	u, err := url.Parse(testBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("prefix")
	u.RawQuery = q.Encode()
	opts, err := goredis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries = -1
	c := goredis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// pushReceiveComplete runs one task through d: push, a waiting receive
// (which subscribes to the queue's channel), complete.
func pushReceiveComplete(t *testing.T, d *Driver) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := d.Push(ctx, []*driver.Message{{ID: "t1", Body: []byte("hello")}}); err != nil {
		t.Fatalf("push: %v", err)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Second})
	if err != nil || len(got) != 1 || got[0].ID != "t1" {
		t.Fatalf("receive = %v, %v; want the pushed task t1", got, err)
	}
	if errs := d.Complete(ctx, driver.Completions(got[0].Lease)); errs != nil {
		t.Fatalf("complete: %v", errs)
	}
	// A second waiting receive finds nothing and leaves the subscription
	// running until Close.
	if got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 50 * time.Millisecond}); err != nil || len(got) != 0 {
		t.Fatalf("receive on the emptied queue = %v, %v", got, err)
	}
}

// TestNewFromUserClient builds a queue from a client the application owns:
// tasks go through it, and closing the driver leaves the client usable.
func TestNewFromUserClient(t *testing.T) {
	t.Parallel()
	c := userClient(t)
	u, err := url.Parse(newQueueURL(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(testCtx(t), c, Options{Queue: u.Query().Get("queue"), Prefix: testPrefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	pushReceiveComplete(t, d)
	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := c.Ping(testCtx(t)).Err(); err != nil {
		t.Fatalf("the application's client after the driver closed: %v", err)
	}
}

// TestOpenerClosesItsClient: a driver opened from a URL owns the client it
// built and closes it.
func TestOpenerClosesItsClient(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	pushReceiveComplete(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.client.Ping(testCtx(t)).Err(); err == nil {
		t.Fatal("the opener's client still answers after Close")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	c := userClient(t)
	tests := []struct {
		opts Options
		want string
	}{
		{Options{Queue: "a{b"}, "Queue"},
		{Options{Prefix: "}"}, "Prefix"},
		{Options{MaxMessageBytes: -1}, "MaxMessageBytes"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.opts), func(t *testing.T) {
			t.Parallel()
			_, err := New(testCtx(t), c, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || errcode.Of(err) != errcode.InvalidArgument {
				t.Fatalf("New(%+v) = %v; want an InvalidArgument error naming %s", tt.opts, err, tt.want)
			}
		})
	}
	if _, err := New(testCtx(t), nil, Options{}); err == nil || errcode.Of(err) != errcode.InvalidArgument {
		t.Fatalf("New with a nil client = %v; want InvalidArgument", err)
	}
}

// TestNewFromUserClusterClient builds a queue from a Redis Cluster client
// the application owns: scripts and the waiting receive's subscription go
// through it, and closing the driver leaves it usable.
func TestNewFromUserClusterClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	base, err := url.Parse(startCluster(t))
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:      append([]string{base.Host}, base.Query()["addr"]...),
		MaxRetries: -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	u, err := url.Parse(newQueueURL(t, base.String()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(testCtx(t), c, Options{Queue: u.Query().Get("queue"), Prefix: testPrefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	pushReceiveComplete(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(testCtx(t)).Err(); err != nil {
		t.Fatalf("the application's cluster client after the driver closed: %v", err)
	}
}
