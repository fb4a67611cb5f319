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
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		runs.Add(1)
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
}
