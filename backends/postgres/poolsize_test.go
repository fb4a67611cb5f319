package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker"
)

// TestPoolMaxConns: the pool of a URL without pool_max_conns holds a
// connection per task the opener runs at once and one more, at least 2
// and at most DefaultPoolMaxConns; an opener that does not say gets
// DefaultPoolMaxConns.
func TestPoolMaxConns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		concurrency int
		want        int32
	}{
		{0, DefaultPoolMaxConns},
		{-3, DefaultPoolMaxConns},
		{1, 2},
		{4, 5},
		{9, 10},
		{200, DefaultPoolMaxConns},
	} {
		if got := poolMaxConns(c.concurrency); got != c.want {
			t.Errorf("poolMaxConns(%d) = %d, want %d", c.concurrency, got, c.want)
		}
	}
}

// TestNarrowWorkerOnItsPool: a queue opened for one task at a time gets a
// pool of two connections, unless the URL sizes it; a worker of one
// handler on it runs its tasks, renews their leases, keeps their records
// and runs its background loops while a waiter reads the records, and the
// process holds three server connections at most (the pool and LISTEN).
func TestNarrowWorkerOnItsPool(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	open := func(raw string) (*jobq.Queue, *Driver) {
		t.Helper()
		q, err := jobq.OpenWithOptions(ctx, raw, jobq.Options{Concurrency: 1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		var d *Driver
		if !q.As(&d) {
			t.Fatal("As(**Driver) failed")
		}
		return q, d
	}
	if _, d := open(newQueueURL(t, "pool_max_conns=6")); d.pool.Config().MaxConns != 6 {
		t.Errorf("with pool_max_conns=6 in the URL, the pool holds %d", d.pool.Config().MaxConns)
	}
	app := fmt.Sprintf("jobq-narrow-%d", time.Now().UnixNano())
	q, d := open(newQueueURL(t, "application_name="+app))
	if got := d.pool.Config().MaxConns; got != 2 {
		t.Fatalf("opened with Concurrency 1, the pool holds %d connections, want 2", got)
	}

	const n = 60
	tasks := make([]*jobq.Task, n)
	ids := make([]string, n)
	for i := range tasks {
		ids[i] = fmt.Sprintf("narrow-%d", i)
		tasks[i] = &jobq.Task{ID: ids[i], Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	// A short visibility makes the lease keeper renew the first task (it
	// runs longer: renewals every second), and short intervals the
	// registry and cancel polls.
	w := worker.New(q, worker.HandlerFunc(func(ctx context.Context, j *worker.Job) error {
		pause := 10 * time.Millisecond
		if j.Task.ID == ids[0] {
			pause = 2500 * time.Millisecond
		}
		time.Sleep(pause)
		return nil
	}), worker.Options{Concurrency: 1, Wait: true, Visibility: 2 * time.Second, HeartbeatInterval: 30 * time.Millisecond,
		StatusInterval: 50 * time.Millisecond, CancelPoll: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	results, err := q.Wait(ctx, ids...)
	w.Stop()
	if err := <-runErr; err != nil {
		t.Errorf("worker: %v", err)
	}
	if err != nil {
		t.Fatalf("waiting for the records: %v (the worker ran %d of %d tasks)", err, w.Counts().Done, n)
	}
	for _, r := range results {
		if r.State != driver.ResultSucceeded {
			t.Errorf("task %s ended %s, want succeeded", r.ID, r.State)
		}
	}
	if c := w.Counts(); len(results) != n || c.Done != n || c.LeaseLost != 0 {
		t.Errorf("%d records; the worker's counts %+v; want %d records and done, no lease lost", len(results), c, n)
	}
	var conns int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&conns); err != nil {
		t.Fatal(err)
	}
	if conns > 3 {
		t.Errorf("the process holds %d server connections, want at most 3 (a pool of 2 and LISTEN)", conns)
	}
}
