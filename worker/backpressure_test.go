package worker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker"
)

// TestFailureBackoffPauses: after each failure in a row the worker waits at
// least the backoff before it starts the next task.
func TestFailureBackoffPauses(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	for i := range 4 {
		push(t, q, &jobq.Task{Command: fmt.Sprintf("false %d", i)})
	}
	var mu sync.Mutex
	var starts []time.Time
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return errors.New("boom")
	})
	base := 100 * time.Millisecond
	err := worker.Run(context.Background(), q, h, worker.Options{Logger: quietLog(), Poll: 50 * time.Millisecond,
		MaxConsecutiveFailures: -1, FailureBackoff: worker.FailureBackoff{Base: base, Max: 2 * base},
		Concurrency: 1, Prefetch: -1}) // one at a time: the pause is between tasks
	if err != nil {
		t.Fatal(err)
	}
	if len(starts) != 4 {
		t.Fatalf("%d tasks started, want 4", len(starts))
	}
	want := []time.Duration{base, 2 * base, 2 * base}
	for i, min := range want {
		if gap := starts[i+1].Sub(starts[i]); gap < min {
			t.Errorf("task %d started %v after failure %d; the backoff is at least %v", i+2, gap, i+1, min)
		}
	}
}

// TestEmulatedConcurrencyPerWorker: on a backend that declares concurrency
// limits emulated, the worker holds the cap within its process, and the
// blocked tasks go back without using up a retry.
func TestEmulatedConcurrencyPerWorker(t *testing.T) {
	t.Parallel()
	url := "mem://worker-emulated-" + rand.Text() + "?emulated=concurrency-limit,rate-limit"
	q, err := jobq.OpenWithOptions(t.Context(), url, jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Admin().SetPolicy(t.Context(), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "licence", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	const n = 4
	for i := range n {
		push(t, q, &jobq.Task{Command: fmt.Sprintf("run %d", i), ConcurrencyKey: "licence"})
	}
	push(t, q, &jobq.Task{Command: "unkeyed"})
	var mu sync.Mutex
	running, peak := 0, 0
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if job.Task.ConcurrencyKey == "" {
			return nil
		}
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: n, Logger: quietLog(), Poll: 100 * time.Millisecond})
	if err := w.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := w.Counts()
	if c.Done != n+1 || c.DeadLettered != 0 || c.Failed != 0 {
		t.Errorf("counts %+v; want %d done, none failed (a blocked task uses no retry)", c, n+1)
	}
	if peak > 1 {
		t.Errorf("%d tasks with key \"licence\" ran at once in one worker; the cap is 1", peak)
	}
}
