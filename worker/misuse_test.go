package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/worker"
)

// TestHandlerPanicFailsTheAttempt: a handler that panics fails its attempt
// (dead-lettered here, with no retries left, the panic as the reason and
// the stack as the detail) instead of taking the process down; the
// worker goes on with the other tasks.
func TestHandlerPanicFailsTheAttempt(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "panic"}, &jobq.Task{Command: "fine"})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if job.Task.Command == "panic" {
			panic("handler blew up")
		}
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 1, Logger: quietLog()})
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	if c := w.Counts(); c.Done != 1 || c.DeadLettered != 1 {
		t.Fatalf("counts %+v; want 1 done, 1 dead-lettered", c)
	}
	dead, err := q.Admin().DeadLetters(context.Background(), 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters = %d, %v; want 1", len(dead), err)
	}
	if !strings.Contains(dead[0].Reason, "handler panicked: handler blew up") || !strings.Contains(dead[0].Detail, "goroutine") {
		t.Errorf("dead letter reason %q, detail %.80q; want the panic and its stack", dead[0].Reason, dead[0].Detail)
	}
}

// TestWorkerMisuse: a Worker made with a nil queue or handler, or run a
// second time, returns an error with the code to match instead of
// panicking.
func TestWorkerMisuse(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ok := worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })
	for _, tc := range []struct {
		name string
		q    *jobq.Queue
		h    worker.Handler
		want string
	}{
		{"nil queue", nil, ok, "the queue is nil"},
		{"nil handler", q, nil, "the handler is nil"},
	} {
		w := worker.New(tc.q, tc.h, worker.Options{Logger: quietLog()})
		w.Stop()
		if err := w.Run(context.Background()); errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run = %v; want InvalidArgument saying %q", tc.name, err, tc.want)
		}
	}
	w := worker.New(q, ok, worker.Options{Logger: quietLog()})
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("first Run = %v", err)
	}
	if err := w.Run(context.Background()); errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), "runs once") {
		t.Errorf("second Run = %v; want FailedPrecondition saying a Worker runs once", err)
	}
}

// TestStopTimeoutBoundsRun: with a handler that ignores its context and
// Job.Kill, Run still returns by Options.StopTimeout after Stop (the task
// is left to its lease), not a grace period later.
func TestStopTimeoutBoundsRun(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "stuck"})
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error {
		close(started)
		<-release
		return nil
	})
	const stopTimeout = 3 * time.Second
	w := worker.New(q, h, worker.Options{Logger: quietLog(), StopTimeout: stopTimeout, Wait: true})
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	<-started
	stopped := time.Now()
	w.Stop()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return a minute after Stop")
	}
	// A second past the timeout is what the overshoot was; half of it is
	// room for a slow machine.
	if took := time.Since(stopped); took > stopTimeout+500*time.Millisecond {
		t.Errorf("Run returned %v after Stop; want by the stop timeout, %v", took.Round(time.Millisecond), stopTimeout)
	}
}
