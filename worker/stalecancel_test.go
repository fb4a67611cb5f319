package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/worker"
)

// TestStaleCancelRequestUnderResultsNone: under results none, a task that
// ends by itself after a cancel was asked for it, before its worker saw
// the request, writes no record over the request. A task pushed again
// later with the same ID must run to its end: the old request is not for
// it. It used to be stopped as cancelled by its worker's next poll.
func TestStaleCancelRequestUnderResultsNone(t *testing.T) {
	t.Parallel()
	suffix := time.Now().Format("150405.000000")
	for name, u := range engines.URLs(t, "stalecancel") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q := engines.Open(t, u)
			if err := q.Admin().SetPolicy(t.Context(), driver.KeepResults(driver.ResultsNone)); err != nil {
				t.Fatal(err)
			}
			task := func() *jobq.Task { return &jobq.Task{Command: "run " + suffix} }
			id := pushOne(t, q, task())

			// The first run: cancelled while it runs, it ends by itself
			// before its worker (which does not poll) sees the request.
			started, release := make(chan struct{}), make(chan struct{})
			first := worker.New(q, startSignal(worker.HandlerFunc(func(context.Context, *worker.Job) error {
				<-release
				return nil
			}), started), worker.Options{Logger: quietLog(), CancelPoll: -1, MaxTasks: 1})
			errc := make(chan error, 1)
			go func() { errc <- first.Run(t.Context()) }()
			<-started
			res, err := q.Admin().Cancel(t.Context(), id)
			if err != nil || len(res) != 1 || res[0].Outcome != jobq.CancelPending {
				t.Fatalf("cancel of the running task = %+v, %v; want it requested", res, err)
			}
			close(release)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if c := first.Counts(); c.Done != 1 {
				t.Fatalf("first run: counts %+v; want it done", c)
			}

			// The second run of the same task, pushed afterwards, is not
			// cancelled by the first run's request.
			ageCancelRequest(t, q, id, 2*time.Minute) // past the clocks' slack
			if got := pushOne(t, q, task()); got != id {
				t.Fatalf("pushed again as %s; want %s", got, id)
			}
			started2 := make(chan struct{})
			second := worker.New(q, startSignal(worker.HandlerFunc(func(ctx context.Context, _ *worker.Job) error {
				// Long enough for many polls: a stale request stops it.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Second):
					return nil
				}
			}), started2), worker.Options{Logger: quietLog(), CancelPoll: 20 * time.Millisecond, MaxTasks: 1})
			if err := second.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if c := second.Counts(); c.Done != 1 || c.Cancelled != 0 {
				t.Fatalf("second run: counts %+v; want it done, not cancelled by the first run's request", c)
			}
		})
	}
}

// ageCancelRequest moves the cancel request of task id back by d, as if it
// had been asked for that long ago.
func ageCancelRequest(t *testing.T, q *jobq.Queue, id string, d time.Duration) {
	t.Helper()
	store, ok := hooks.Driver(q).(driver.ResultStore)
	if !ok {
		t.Fatal("the driver keeps no records")
	}
	recs, err := store.GetResults(t.Context(), []string{id})
	if err != nil || len(recs) != 1 || recs[0] == nil || recs[0].State != driver.ResultCancelRequested {
		t.Fatalf("the request of task %s: %v, %v; want a cancel-requested record", id, recs, err)
	}
	// A request replaces no unexpired record: delete it, then put it back.
	del, ok := store.(driver.ResultDeleter)
	if !ok {
		t.Fatal("the driver cannot delete records")
	}
	if _, err := del.DeleteResults(t.Context(), []string{id}); err != nil {
		t.Fatal(err)
	}
	r := *recs[0]
	r.UpdatedAt = r.UpdatedAt.Add(-d)
	if err := store.PutResults(t.Context(), []*driver.ResultRecord{&r}); err != nil {
		t.Fatal(err)
	}
}
