package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker"
)

// startSignal wraps h so that started is closed when the first task starts.
func startSignal(h worker.Handler, started chan struct{}) worker.Handler {
	var once atomic.Bool
	return worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if once.CompareAndSwap(false, true) {
			close(started)
		}
		return h.Handle(ctx, job)
	})
}

// TestCancelRunningTask cancels a running task: the worker stops it within
// a few polls and settles it as cancelled, not retried and not a failure.
func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	var cause atomic.Value
	goHandler := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		<-ctx.Done()
		cause.Store(context.Cause(ctx))
		return ctx.Err()
	})
	for _, tc := range []struct {
		name    string
		handler worker.Handler
		goCause bool // check the cause the Go handler saw
	}{
		{"shell sleep 60", &worker.Shell{KillTimeout: 10 * time.Second}, false},
		{"go handler", goHandler, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := openMem(t, "")
			id := pushOne(t, q, &jobq.Task{Command: "sleep 60", NumRetries: 3})
			started := make(chan struct{})
			w := worker.New(q, startSignal(tc.handler, started), worker.Options{Logger: quietLog(), CancelPoll: 50 * time.Millisecond})
			events, _ := w.Subscribe(0)
			// The guard ends the run (requeuing the task, which fails the
			// test) should the cancel not stop the task.
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- w.Run(ctx) }()
			<-started
			res, err := q.Admin().Cancel(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Outcome != jobq.CancelPending {
				t.Fatalf("cancel of a running task: %+v; want it pending", res)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if c := w.Counts(); c.Cancelled != 1 || c.Failed != 0 || c.Requeued != 0 || c.Done != 0 {
				t.Fatalf("counts %+v; want one cancelled, nothing else", c)
			}
			var outcomes []worker.Outcome
			for ev := range events {
				outcomes = append(outcomes, ev.Outcome)
				if !ev.Durable || !errors.Is(ev.Err, worker.ErrCancelled) {
					t.Errorf("event %+v; want durable, with ErrCancelled", ev)
				}
			}
			if len(outcomes) != 1 || outcomes[0] != worker.Cancelled {
				t.Fatalf("events %v; want one cancelled", outcomes)
			}
			r := result(t, q, id)
			if r.State != driver.ResultCancelled || len(r.Attempts) != 1 {
				t.Fatalf("record %+v; want cancelled after one attempt", r)
			}
			if st, err := q.Admin().Stats(context.Background()); err != nil || st.Ready+st.Delayed+st.InFlight+st.Dead != 0 {
				t.Fatalf("stats %+v (%v); want an empty queue: the task is not retried", st, err)
			}
			if tc.goCause && !errors.Is(cause.Load().(error), worker.ErrCancelled) {
				t.Fatalf("the handler's context ended with cause %v; want ErrCancelled", cause.Load())
			}
		})
	}
}

// TestCancelDropsQueuedTaskUnrun: where the backend cannot remove a queued
// task (Cancel emulated), the worker that receives a cancelled task settles
// it as cancelled without running it; it does not count as a task taken
// (MaxTasks, as `jobq pull` uses).
func TestCancelDropsQueuedTaskUnrun(t *testing.T) {
	t.Parallel()
	for _, maxTasks := range []int{0, 1} {
		t.Run(fmt.Sprintf("MaxTasks=%d", maxTasks), func(t *testing.T) {
			t.Parallel()
			q := openMem(t, "emulated=cancel")
			cancelled := pushOne(t, q, &jobq.Task{Command: "echo cancelled"})
			kept := pushOne(t, q, &jobq.Task{Command: "echo kept"})
			res, err := q.Admin().Cancel(context.Background(), cancelled)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Outcome != jobq.CancelPending {
				t.Fatalf("cancel where the backend cannot remove: %+v; want it pending", res)
			}
			var ran []string
			h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
				ran = append(ran, job.Task.Command)
				return nil
			})
			// One slot and no prefetch: the first receive gets only the
			// cancelled task.
			w := worker.New(q, h, worker.Options{Logger: quietLog(), Concurrency: 1, Prefetch: -1, MaxTasks: maxTasks, Poll: 100 * time.Millisecond})
			if err := w.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(ran) != 1 || ran[0] != "echo kept" {
				t.Fatalf("ran %q; want only the task not cancelled", ran)
			}
			if c := w.Counts(); c.Cancelled != 1 || c.Done != 1 || c.Failed != 0 {
				t.Fatalf("counts %+v; want one cancelled, one done", c)
			}
			if r := result(t, q, cancelled); r.State != driver.ResultCancelled || len(r.Attempts) != 0 {
				t.Fatalf("record of the cancelled task %+v; want cancelled, never attempted", r)
			}
			if r := result(t, q, kept); r.State != driver.ResultSucceeded {
				t.Fatalf("record of the other task %+v; want succeeded", r)
			}
		})
	}
}

// TestCancelledTaskKeepsItsLease: a cancel request ends the handler's
// context, and the worker keeps renewing the lease until the handler has
// returned, however long it takes to stop; the task is then settled as
// cancelled, its lease never lost.
func TestCancelledTaskKeepsItsLease(t *testing.T) {
	t.Parallel()
	const visibility = 400 * time.Millisecond
	q := openMem(t, "")
	id := pushOne(t, q, &jobq.Task{Command: "true"})
	started := make(chan struct{})
	var renewed, lost atomic.Bool
	slowToStop := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		<-ctx.Done()
		// Stop only once the lease was renewed after the cancel (or lost,
		// or a guard passed).
		expiry := job.Envelope.Expiry()
		guard := time.After(20 * visibility)
		for !renewed.Load() && !lost.Load() {
			select {
			case <-job.Envelope.LockLost():
				lost.Store(true)
			case <-guard:
				return ctx.Err()
			case <-time.After(visibility / 20):
				renewed.Store(job.Envelope.Expiry().After(expiry))
			}
		}
		return ctx.Err()
	})
	w := worker.New(q, startSignal(slowToStop, started), worker.Options{Logger: quietLog(), CancelPoll: 50 * time.Millisecond, Visibility: visibility})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	<-started
	if _, err := q.Admin().Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !renewed.Load() || lost.Load() {
		t.Errorf("after the cancel request: lease renewed %t, lost %t; want renewed, not lost", renewed.Load(), lost.Load())
	}
	if c := w.Counts(); c.Cancelled != 1 || c.LeaseLost != 0 || c.Requeued != 0 || c.Failed != 0 {
		t.Fatalf("counts %+v; want one cancelled, nothing else", c)
	}
}

// TestCancelRequestedBeforeRedeliveryDropsUnrun: a task cancelled while it
// ran on a worker that died before it saw the request (here a receive that
// never settles, its lease left to expire) is dropped unrun by the worker
// that receives it again, on a backend that removes queued tasks itself
// (Cancel native), and its record says why.
func TestCancelRequestedBeforeRedeliveryDropsUnrun(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	id := pushOne(t, q, &jobq.Task{Command: "echo cancelled"})
	if _, err := q.Receive(context.Background(), jobq.ReceiveOptions{Visibility: time.Second}); err != nil {
		t.Fatal(err)
	}
	res, err := q.Admin().Cancel(context.Background(), id)
	if err != nil || len(res) != 1 || res[0].Outcome != jobq.CancelPending {
		t.Fatalf("cancel of the task in flight = %+v, %v; want it pending", res, err)
	}
	time.Sleep(1100 * time.Millisecond) // the lease expires: the "dead worker"'s
	var ran atomic.Int64
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error {
		ran.Add(1)
		return nil
	})
	w := worker.New(q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 0 {
		t.Fatalf("the handler ran %d times; want the cancelled task dropped unrun", ran.Load())
	}
	if c := w.Counts(); c.Cancelled != 1 || c.Done != 0 {
		t.Fatalf("counts %+v; want one cancelled", c)
	}
	if r := result(t, q, id); r.State != driver.ResultCancelled || !strings.Contains(r.Error, "dropped unrun by the worker that received it again") {
		t.Fatalf("record %+v; want cancelled, saying it was dropped on its redelivery", r)
	}
}

// TestExitCancelsAChainOfDependants: a worker that dead-letters a parent
// after a retry, on a queue where a chain of tasks waits for it, cancels
// the whole chain (the child, then the grandchild) before it exits on the
// empty queue, instead of leaving the grandchild held for the next worker.
func TestExitCancelsAChainOfDependants(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	parent := pushOne(t, q, &jobq.Task{Command: "false", NumRetries: 1, RetryBackoff: fastRetry})
	child := pushOne(t, q, &jobq.Task{Command: "echo child", After: []string{parent}})
	grandchild := pushOne(t, q, &jobq.Task{Command: "echo grandchild", After: []string{child}})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if job.Task.Command == "false" {
			return errors.New("exit status 1")
		}
		return nil
	})
	w := worker.New(q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{child, grandchild} {
		if r := result(t, q, id); r.State != driver.ResultCancelled {
			t.Errorf("record of %s after the worker exited: %+v; want cancelled", id, r)
		}
	}
}
