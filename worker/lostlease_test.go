package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// TestLostLeasesDeadLetter: a task whose lease expires on every delivery
// (here it outlasts its lease without heartbeats) spends no retry, so it
// would be delivered forever; after MaxLostLeases such deliveries in a
// row it is dead-lettered, with a reason that says why.
func TestLostLeasesDeadLetter(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "outlasts its lease"})
	var runs atomic.Int64
	var fixed atomic.Bool
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		runs.Add(1)
		if fixed.Load() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return nil
		}
	})
	w := worker.New(q, h, worker.Options{DisableHeartbeat: true, Visibility: 300 * time.Millisecond, MaxLostLeases: 2,
		Poll: 50 * time.Millisecond, Logger: quietLog()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	dead, err := q.Admin().DeadLetters(context.Background(), 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %v, %v; want the task", dead, err)
	}
	if !strings.Contains(dead[0].Reason, "its lease expired on 2 deliveries in a row") {
		t.Errorf("dead-letter reason %q; want it to say the lease expired on 2 deliveries in a row", dead[0].Reason)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the task ran %d times; want 2 (dead-lettered at the third delivery, unrun)", n)
	}

	// Requeued from the dead letters once fixed, it runs: its history
	// covers the lost deliveries, which are not counted again.
	fixed.Store(true)
	if n, err := q.Admin().RequeueDeadLetters(context.Background(), dead[0].MessageID); err != nil || n != 1 {
		t.Fatalf("requeue of the dead letter: %d, %v", n, err)
	}
	w = worker.New(q, h, worker.Options{DisableHeartbeat: true, Visibility: 300 * time.Millisecond, MaxLostLeases: 2,
		Poll: 50 * time.Millisecond, Logger: quietLog()})
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run after the requeue: %v", err)
	}
	if c := w.Counts(); c.Done != 1 || c.DeadLettered != 0 {
		t.Errorf("after the requeue: %d done, %d dead-lettered; want the task run and done", c.Done, c.DeadLettered)
	}
}
