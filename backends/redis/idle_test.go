package redis

import (
	"bufio"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
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
	for d.wake.Waiters() < receivers {
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

// idleWorker starts a waiting worker running h, one task at a time, on a
// queue of a Redis server of its own, and stops it when the test ends. It
// returns the queue and a reader of the server's command counts.
func idleWorker(t *testing.T, h worker.Handler, poll, maxPoll time.Duration) (*jobq.Queue, func() map[string]int64) {
	t.Helper()
	srv := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	q, err := jobq.OpenWithOptions(ctx, newQueueURL(t, srv.url()), jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := srv.client()
	counts := func() map[string]int64 { return commandCounts(t, c.Info(ctx, "commandstats").Val()) }
	w := worker.New(q, h, worker.Options{Concurrency: 1, Prefetch: -1, Wait: true, Poll: poll, MaxPoll: maxPoll,
		HeartbeatInterval: -1, CancelPoll: -1, StatusInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		w.Stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
		q.Close()
		cancel()
	})
	return q, counts
}

// TestIdleWorkerBacksOff: a waiting worker on an empty queue claims less
// and less often (its receive wait doubles from Poll up to MaxPoll), yet
// picks up a pushed task at once, woken through pub/sub, and a found task
// brings its wait back to Poll.
func TestIdleWorkerBacksOff(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for several seconds")
	}
	t.Parallel()
	ran := make(chan time.Time, 1)
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error {
		ran <- time.Now()
		return nil
	})
	const poll, maxPoll = 50 * time.Millisecond, 800 * time.Millisecond
	q, counts := idleWorker(t, h, poll, maxPoll)
	ctx := t.Context()
	claims := func() int64 {
		c := counts()
		return c["evalsha"] + c["eval"]
	}

	// Idle for 3 s: waits of 50, 100, 200, 400, then 800 ms, so about 7
	// claims; with the wait fixed at Poll there would be about 60.
	const window = 3 * time.Second
	time.Sleep(100 * time.Millisecond) // the worker's first claims
	before := claims()
	time.Sleep(window)
	idle := claims() - before
	t.Logf("an idle worker made %d script calls in %v (Poll %v, MaxPoll %v)", idle, window, poll, maxPoll)
	if idle > 15 {
		t.Errorf("an idle worker made %d script calls in %v; want at most 15 (its wait doubling from %v to %v)", idle, window, poll, maxPoll)
	}

	// The worker waits up to MaxPoll now, but a push wakes it.
	pushed := time.Now()
	if _, err := q.Push(ctx, &jobq.Task{Command: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-ran:
		if lat := at.Sub(pushed); lat > maxPoll/2 {
			t.Errorf("the task ran %v after its push; want it woken at once, not at the next claim", lat)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pushed task did not run")
	}
}

// TestIdleWorkerReadsSchedulesLessOften: an idle worker's background loop
// (schedules and held tasks) backs off while it finds nothing to watch:
// its passes 4 then 8 s apart with MaxPoll 8 s, where they were 2 s apart.
func TestIdleWorkerReadsSchedulesLessOften(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for several seconds")
	}
	t.Parallel()
	// Poll = MaxPoll: the worker's claims, and the pause reads they
	// bring, stay at one per 8 s, so the count is the loop's.
	const maxPoll = 8 * time.Second
	_, counts := idleWorker(t, worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil }), maxPoll, maxPoll)
	reads := func() int64 { return counts()["hgetall"] }
	time.Sleep(time.Second) // the worker's start
	before := reads()
	const window = 11 * time.Second
	time.Sleep(window)
	got := reads() - before
	t.Logf("an idle worker made %d HGETALL in %v (MaxPoll %v)", got, window, maxPoll)
	// A pass at 4 s (the next at 12): 6 reads with the worker's claim.
	// Every 2 s it was 18.
	if got > 12 {
		t.Errorf("an idle worker read the policies with %d HGETALL in %v; want at most 12 (its schedule loop backing off to %v)", got, window, maxPoll)
	}
}
