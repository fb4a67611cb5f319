package redis

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// commandCounts parses INFO commandstats into calls per command, leaving out
// the commands the measurement itself sends.
func commandCounts(t testing.TB, info string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		// cmdstat_evalsha:calls=12,usec=345,...
		name, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(rest, "calls=") {
			continue
		}
		if name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", sc.Text(), err)
		}
		out[name] = n
	}
	return out
}

// TestIdleWorkerCost measures, with INFO commandstats on a private server,
// how many commands 16 receivers waiting on an empty queue send per second
// (the portable layer's WaitForever, as the worker uses it). Receivers wait
// on pub/sub, so the cost is one claim per receiver per wait period.
func TestIdleWorkerCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for several seconds")
	}
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q, err := jobq.Open(ctx, newQueueURL(t, srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	d := driverOf(t, q)

	const receivers = 16
	var wg sync.WaitGroup
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: jobq.WaitForever})
		}()
	}
	for d.wake.waiters() < receivers {
		time.Sleep(5 * time.Millisecond)
	}
	c := srv.client()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const window = 6 * time.Second
	time.Sleep(window)
	counts := commandCounts(t, c.Info(ctx, "commandstats").Val())
	cancel()
	wg.Wait()

	var total int64
	for _, n := range counts {
		total += n
	}
	// commandstats counts the commands a script runs as well as the
	// script call; the calls are the round trips.
	calls := counts["evalsha"] + counts["eval"]
	t.Logf("%d idle receivers in %v: %d script calls (%.2f/s), %d commands counting those inside scripts (%.2f/s): %v",
		receivers, window, calls, float64(calls)/window.Seconds(), total, float64(total)/window.Seconds(), counts)
	// One claim per receiver per wait period (5 s in the portable layer):
	// a 6 s window holds the ends of at most two periods of each receiver,
	// so at most two calls each. Polling would be thousands.
	if limit := int64(2 * receivers); calls > limit {
		t.Fatalf("idle receivers made %d script calls in %v; want at most %d (one per receiver per 5 s wait)", calls, window, limit)
	}
}

// driverOf reaches the Redis driver under a queue.
func driverOf(t testing.TB, q *jobq.Queue) *Driver {
	t.Helper()
	var d *Driver
	if !q.As(&d) {
		t.Fatal("queue.As(**redis.Driver) failed")
	}
	return d
}
