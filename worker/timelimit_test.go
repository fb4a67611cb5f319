package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// TestTaskTimeLimit runs tasks past Options.TaskTimeLimit: a shell task's
// process is terminated, a Go handler's context ends with ErrTimeLimit as
// its cause, and either way the attempt is a failure whose reason and
// attempt history name the limit.
func TestTaskTimeLimit(t *testing.T) {
	t.Parallel()
	goHandler := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), worker.ErrTimeLimit) {
			return worker.Permanent(errors.New("context ended with cause " + context.Cause(ctx).Error() + "; want ErrTimeLimit"))
		}
		return ctx.Err()
	})
	for _, tc := range []struct {
		name    string
		handler worker.Handler
		limit   time.Duration
		want    string
	}{
		{"shell sleep 60", &worker.Shell{KillTimeout: 10 * time.Second}, 300 * time.Millisecond, "time limit 300ms exceeded"},
		{"go handler", goHandler, 200 * time.Millisecond, "time limit 200ms exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			push(t, q, &jobq.Task{Command: "sleep 60", NumRetries: 0})
			// The guard ends the run (requeuing the task, which fails the
			// test) should the limit not stop the task.
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			w := worker.New(q, tc.handler, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, TaskTimeLimit: tc.limit})
			if err := w.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if c := w.Counts(); c.Failed != 1 || c.DeadLettered != 1 || c.Requeued != 0 {
				t.Fatalf("counts %+v; want one failure, dead-lettered", c)
			}
			dead, err := q.Admin().DeadLetters(context.Background(), 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(dead) != 1 || !strings.Contains(dead[0].Reason, tc.want) {
				t.Fatalf("dead letters %+v; want one whose reason says %q", dead, tc.want)
			}
			as := dead[0].Task.Attempts
			if len(as) != 1 || as[0].Outcome != jobq.OutcomeFailure || !strings.Contains(as[0].Detail, tc.want) {
				t.Fatalf("attempts %+v; want one failure whose detail says %q", as, tc.want)
			}
		})
	}
}

// TestTaskTimeLimitRetries: an attempt stopped at its time limit uses up a
// retry like any failure, and a later attempt within the limit succeeds.
func TestTaskTimeLimitRetries(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "true", NumRetries: 1, RetryBackoff: fastRetry})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if job.Envelope.DeliveryCount > 1 {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	w := worker.New(q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, TaskTimeLimit: 100 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := w.Counts(); c.Failed != 1 || c.Done != 1 || c.DeadLettered != 0 {
		t.Fatalf("counts %+v; want one failure, then done", c)
	}
}
