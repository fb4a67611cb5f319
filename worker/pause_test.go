package worker_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker"
)

// TestPauseSeenAfterLongIdleReceive pauses a queue while its only worker
// waits in a receive that outlasts the pause refresh period, then pushes a
// task: the worker must check that task against pauses read after the
// pause, not against the view it had before it started waiting, and leave
// it queued until the queue is resumed.
func TestPauseSeenAfterLongIdleReceive(t *testing.T) {
	t.Parallel()
	url := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=idle"
	ctx := context.Background()
	q, err := jobq.OpenWithOptions(ctx, url, jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	admin, err := jobq.OpenWithOptions(ctx, url, jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })

	ran := make(chan time.Time, 1)
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error {
		ran <- time.Now()
		return nil
	})
	wait := 3 * driver.PauseRefresh
	w := worker.New(q, h, worker.Options{Wait: true, Poll: wait, MaxPoll: wait, Logger: quietLog()})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(runCtx) }()

	// Let the worker read the pauses (none) and start waiting.
	time.Sleep(driver.PauseRefresh + driver.PauseRefresh/2)
	if _, err := admin.Admin().Pause(ctx, jobq.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Push(ctx, &jobq.Task{Command: "after the pause"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
		t.Fatal("the worker ran a task pushed after the queue was paused")
	case <-time.After(wait + driver.PauseRefresh):
	}
	resumed := time.Now()
	if _, err := admin.Admin().Resume(ctx, jobq.PauseOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-ran:
		if at.Before(resumed) {
			t.Fatalf("the task ran at %v, before the resume at %v", at, resumed)
		}
	case <-time.After(time.Minute):
		t.Fatal("the task did not run within a minute of the resume")
	}
	stop()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// TestMaxTasksSkipsPausedTasks runs a worker limited to one task (as
// `jobq QUEUE pull`) on a queue whose first task's kind is paused: the
// paused task is put back without running, so it must not use up the
// limit, and the worker runs the next task instead of exiting having run
// nothing.
func TestMaxTasksSkipsPausedTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := heldKindPaused(t)
	for _, kind := range []string{"held", "free"} {
		if _, err := q.Push(ctx, &jobq.Task{Kind: kind, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var ran []string
	h := worker.HandlerFunc(func(_ context.Context, j *worker.Job) error {
		ran = append(ran, j.Task.Kind)
		return nil
	})
	w := worker.New(q, h, worker.Options{MaxTasks: 1, Poll: 50 * time.Millisecond, Logger: quietLog()})
	runCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if err := w.Run(runCtx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(ran) != 1 || ran[0] != "free" {
		t.Fatalf("the worker limited to one task ran %v; want the one task of the kind that is not paused", ran)
	}
}

// TestPausePutBackIsRecorded: a task the worker puts back because its kind
// is paused carries a put-back entry naming the pause, so the next
// receiver does not report its delivery as a lost worker.
func TestPausePutBackIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := heldKindPaused(t)
	var err error
	if _, err := q.Push(ctx, &jobq.Task{Kind: "held", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })
	w := worker.New(q, h, worker.Options{Wait: true, Poll: 50 * time.Millisecond, Logger: quietLog()})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	var peeked []*jobq.PeekedTask
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if peeked, err = q.Admin().Peek(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if len(peeked) == 1 && peeked[0].DeliveryCount >= 1 && !peeked[0].InFlight {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the paused task was not put back within 30 s: %+v", peeked)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	as := peeked[0].Attempts(q)
	if len(as) != 1 || as[0].Outcome != jobq.OutcomePutBack || as[0].Delivery != 1 || !strings.Contains(as[0].Detail, "paused: kind held") {
		t.Fatalf("history after the put-back: %+v; want one put-back entry of delivery 1 naming the pause", as)
	}
}

// heldKindPaused opens a new SQLite queue whose tasks of kind "held" are
// paused.
func heldKindPaused(t *testing.T) *jobq.Queue {
	t.Helper()
	url := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=paused"
	q, err := jobq.OpenWithOptions(context.Background(), url, jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	if _, err := q.Admin().Pause(context.Background(), jobq.PauseOptions{Kind: "held"}); err != nil {
		t.Fatal(err)
	}
	return q
}
