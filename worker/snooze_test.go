package worker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// TestSnooze: a handler that snoozes has its task back after the delay,
// with no retry spent and no failure counted, and the history says so; a
// shell task snoozes by exiting with worker.ExitSnooze.
func TestSnooze(t *testing.T) {
	t.Parallel()
	exitSnooze := worker.ExitSnooze
	const delay = 300 * time.Millisecond
	marker := filepath.Join(t.TempDir(), "ran-once")
	tests := []struct {
		name    string
		task    *jobq.Task
		handler func(runs *[]time.Time, mu *sync.Mutex) worker.Handler
		code    *int
	}{
		{
			name: "Go handler",
			task: &jobq.Task{Command: "snooze once"},
			handler: func(runs *[]time.Time, mu *sync.Mutex) worker.Handler {
				return worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
					mu.Lock()
					defer mu.Unlock()
					*runs = append(*runs, time.Now())
					if len(*runs) == 1 {
						return worker.Snooze(delay)
					}
					return nil
				})
			},
		},
		{
			name: "shell exit status",
			task: &jobq.Task{Command: fmt.Sprintf("test -e %[1]s || { touch %[1]s; exit %d; }", marker, worker.ExitSnooze)},
			handler: func(runs *[]time.Time, mu *sync.Mutex) worker.Handler {
				sh := &worker.Shell{SnoozeDelay: delay}
				return worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
					mu.Lock()
					*runs = append(*runs, time.Now())
					mu.Unlock()
					return sh.Handle(ctx, job)
				})
			},
			code: &exitSnooze,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			pushed, err := q.Push(context.Background(), tt.task) // no retries: a snooze must not need one
			if err != nil {
				t.Fatal(err)
			}
			var runs []time.Time
			var mu sync.Mutex
			w := worker.New(q, tt.handler(&runs, &mu), worker.Options{Logger: quietLog(), Poll: 50 * time.Millisecond, MaxConsecutiveFailures: 1})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := w.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if len(runs) != 2 {
				t.Fatalf("ran %d times; want 2 (snoozed, then done)", len(runs))
			}
			if gap := runs[1].Sub(runs[0]); gap < delay {
				t.Errorf("ran again %v after snoozing for %v", gap, delay)
			}
			if c := w.Counts(); c.Failed != 0 || c.Done != 1 {
				t.Errorf("counts %+v; want 1 done and no failure", c)
			}
			r, err := q.Result(context.Background(), pushed.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Attempts) != 2 || r.Attempts[0].Outcome != jobq.OutcomeSnoozed || r.Attempts[1].Outcome != jobq.OutcomeSuccess {
				t.Fatalf("attempts %+v; want snoozed then success", r.Attempts)
			}
			if got := r.Attempts[0].ExitCode; (got == nil) != (tt.code == nil) || got != nil && *got != *tt.code {
				t.Errorf("the snoozed attempt's exit code is %v; want %v", got, tt.code)
			}
		})
	}
}
