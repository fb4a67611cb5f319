package worker_test

import (
	"context"
	"errors"
	"path/filepath"
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
