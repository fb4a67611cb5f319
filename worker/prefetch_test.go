package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// prefetchTasks pushes n tasks whose commands are "t0".."t<n-1>".
func prefetchTasks(t *testing.T, q *jobq.Queue, n int) {
	t.Helper()
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("t%d", i)}
	}
	push(t, q, tasks...)
}

// inFlightWhile runs a worker with one handler; the handler call for the
// task named block holds it for half a second, and the others call hold.
// It returns the fewest messages in flight seen while block was held
// (fewestInFlight), with the worker's counts once it has drained. A
// non-zero bar replaces the handler duration under which it prefetches.
func inFlightWhile(t *testing.T, q *jobq.Queue, opts worker.Options, bar time.Duration, block string, hold func(ctx context.Context)) (int64, worker.Counts) {
	t.Helper()
	fewest := int64(-1)
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if job.Task.Command != block {
			hold(ctx)
			return nil
		}
		var err error
		fewest, err = fewestInFlight(ctx, q, 400*time.Millisecond)
		return err
	})
	opts.Logger, opts.Concurrency = quietLog(), 1
	w := worker.New(q, h, opts)
	if bar != 0 {
		worker.SetPrefetchBar(w, bar)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return fewest, w.Counts()
}

// fewestInFlight lets a claim in progress land, then watches q's in-flight
// count for d and returns the lowest it saw: a completion not flushed yet
// is in flight only for a moment, a task claimed ahead throughout.
func fewestInFlight(ctx context.Context, q *jobq.Queue, d time.Duration) (int64, error) {
	time.Sleep(100 * time.Millisecond)
	fewest := int64(-1)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		st, err := q.Admin().Stats(ctx)
		if err != nil {
			return 0, err
		}
		if fewest < 0 || st.InFlight < fewest {
			fewest = st.InFlight
		}
	}
	return fewest, nil
}

// TestPrefetchWhileHandlersAreFast: once handlers have been fast, a worker
// with one handler holds more than one task (claimed ahead), yet runs one
// at a time, and every task runs exactly once. "Fast" is under an hour
// here: on a loaded machine even a no-op handler can average more than the
// default bar, which TestNoPrefetchForSlowHandlers covers.
func TestPrefetchWhileHandlersAreFast(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	prefetchTasks(t, q, 60)
	var running, most atomic.Int64
	fast := func(context.Context) {
		if n := running.Add(1); n > most.Load() {
			most.Store(n)
		}
		running.Add(-1)
	}
	inFlight, c := inFlightWhile(t, q, worker.Options{}, time.Hour, "t40", fast)
	if inFlight < 2 {
		t.Errorf("%d tasks in flight while the handler ran; want more than one (prefetched)", inFlight)
	}
	if most.Load() > 1 {
		t.Errorf("%d handlers ran at once; Concurrency is 1", most.Load())
	}
	if c.Done != 60 {
		t.Errorf("done %d tasks, want 60", c.Done)
	}
}

// TestNoPrefetchForSlowHandlers: handlers slower than the prefetch
// threshold, or Prefetch negative, keep the worker to its free handlers.
func TestNoPrefetchForSlowHandlers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts worker.Options
		hold time.Duration
	}{
		{"slow handlers", worker.Options{}, 60 * time.Millisecond},
		{"prefetch disabled", worker.Options{Prefetch: -1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			prefetchTasks(t, q, 6)
			hold := func(ctx context.Context) { time.Sleep(tt.hold) }
			inFlight, c := inFlightWhile(t, q, tt.opts, 0, "t4", hold)
			if inFlight != 1 {
				t.Errorf("%d tasks in flight while the handler ran; want 1 (nothing prefetched)", inFlight)
			}
			if c.Done != 6 {
				t.Errorf("done %d tasks, want 6", c.Done)
			}
		})
	}
}

// TestDrainRequeuesPrefetchedTasks: a task claimed ahead that has not
// started when the worker drains goes back to the queue at once, unrun.
func TestDrainRequeuesPrefetchedTasks(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	prefetchTasks(t, q, 40)
	var w *worker.Worker
	var ran sync.Map
	var dupes atomic.Int64
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if _, again := ran.LoadOrStore(job.Task.Command, true); again {
			dupes.Add(1)
		}
		if job.Task.Command != "t20" {
			return nil
		}
		fewest, err := fewestInFlight(ctx, q, 200*time.Millisecond)
		if err != nil {
			return err
		}
		if fewest < 2 {
			t.Errorf("%d tasks in flight while t20 ran; want a task claimed ahead too", fewest)
		}
		w.Drain()
		return nil
	})
	w = worker.New(q, h, worker.Options{Concurrency: 1, Logger: quietLog()})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := w.Counts()
	if c.Requeued == 0 {
		t.Error("no prefetched task was requeued when the worker drained")
	}
	st, err := q.Admin().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.InFlight != 0 || st.Ready+c.Done != 40 {
		t.Errorf("after the drain: %d ready, %d in flight, %d done; want the 40 tasks ready or done, none in flight", st.Ready, st.InFlight, c.Done)
	}
	if dupes.Load() != 0 {
		t.Errorf("%d tasks ran twice", dupes.Load())
	}
}
