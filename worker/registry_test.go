package worker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/worker"
)

// waitFor polls cond until it holds or the test's context ends.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatalf("gave up waiting until %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestRegistryLifecycle: a worker announces itself when it starts, shows
// the task it runs and its process's memory at a heartbeat, and is listed
// as withdrawn once Run returns; with cancel polls on or off (the running
// tasks are tracked for both).
func TestRegistryLifecycle(t *testing.T) {
	t.Parallel()
	for _, cancelPoll := range []time.Duration{0, -1} {
		t.Run(fmt.Sprintf("cancel-poll=%v", cancelPoll), func(t *testing.T) {
			t.Parallel()
			testRegistryLifecycle(t, cancelPoll)
		})
	}
}

func testRegistryLifecycle(t *testing.T, cancelPoll time.Duration) {
	q := openQueue(t)
	push(t, q, &jobq.Task{ID: "held", Command: "echo held"})
	release := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		<-release
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 1, Wait: true, Logger: quietLog(),
		WorkerID: "w-lifecycle", HeartbeatInterval: 20 * time.Millisecond, Version: "v9.9.9", CancelPoll: cancelPoll})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()

	var seen *jobq.WorkerInfo
	waitFor(t, "the worker is listed running task held", func() bool {
		ws, err := q.Admin().Workers(t.Context(), jobq.WorkersOptions{TTL: time.Hour})
		if err != nil {
			t.Fatalf("Workers: %v", err)
		}
		for _, x := range ws {
			if x.ID == "w-lifecycle" && slices.Equal(x.Tasks, []string{"held"}) && x.RSSBytes > 0 {
				seen = x
				return true
			}
		}
		return false
	})
	if seen.State != jobq.WorkerLive || seen.Version != "v9.9.9" || seen.Interval != 20*time.Millisecond || seen.Host == "" || seen.PID == 0 || seen.Started.IsZero() {
		t.Errorf("running worker listed as %+v", seen)
	}
	close(release)
	waitFor(t, "the finished task is counted and no task is listed", func() bool {
		ws, _ := q.Admin().Workers(t.Context(), jobq.WorkersOptions{TTL: time.Hour})
		return len(ws) == 1 && ws[0].Done == 1 && len(ws[0].Tasks) == 0
	})
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	ws, err := q.Admin().Workers(t.Context(), jobq.WorkersOptions{})
	if err != nil || len(ws) != 0 {
		t.Fatalf("after Run returned, the default listing holds %v (%v); want nothing", ws, err)
	}
	ws, err = q.Admin().Workers(t.Context(), jobq.WorkersOptions{Withdrawn: true})
	if err != nil || len(ws) != 1 || ws[0].State != jobq.WorkerWithdrawn {
		t.Fatalf("after Run returned, the listing with withdrawn workers holds %v (%v); want w-lifecycle withdrawn", ws, err)
	}
}

// TestRegistryOffOrUnsupported: a worker on a backend without the registry,
// or with the registry turned off, runs its tasks all the same.
func TestRegistryOffOrUnsupported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url string
		interval  time.Duration
	}{
		{"unsupported", "mem://registry-unsupported?unsupported=worker-registry", 0},
		{"off", "mem://registry-off", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := jobq.OpenWithOptions(t.Context(), tc.url, jobq.Options{Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			push(t, q, &jobq.Task{Command: "echo one"})
			w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil }),
				worker.Options{Logger: quietLog(), HeartbeatInterval: tc.interval})
			if err := w.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if w.Counts().Done != 1 {
				t.Fatalf("done %d, want 1", w.Counts().Done)
			}
			ws, err := q.Admin().Workers(t.Context(), jobq.WorkersOptions{Withdrawn: true})
			switch {
			case tc.name == "unsupported" && err == nil:
				t.Errorf("Workers on a backend without the registry: no error")
			case tc.name == "off" && (err != nil || len(ws) != 0):
				t.Errorf("a worker with the registry off is listed: %v (%v)", ws, err)
			}
		})
	}
}

// TestWithdrawnAfterStopTimeout: a worker whose handler outlives the stop
// timeout is still withdrawn when Run returns. The withdrawal ran on the
// writes' context, cancelled at the stop timeout, so it failed ("context
// canceled") and the worker was listed as live, then vanished.
func TestWithdrawnAfterStopTimeout(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "stuck"})
	release := make(chan struct{})
	defer close(release)
	_, _ = runAndStop(q, worker.Options{StopTimeout: 100 * time.Millisecond, Wait: true, WorkerID: "w-stuck"}, func(context.Context) error {
		<-release
		return nil
	})
	ws, err := q.Admin().Workers(t.Context(), jobq.WorkersOptions{Withdrawn: true, TTL: time.Hour})
	if err != nil || len(ws) != 1 || ws[0].ID != "w-stuck" || ws[0].State != jobq.WorkerWithdrawn {
		t.Fatalf("after Run returned past its stop timeout, the listing holds %+v (%v); want w-stuck withdrawn", ws, err)
	}
}
