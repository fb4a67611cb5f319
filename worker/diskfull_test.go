//go:build linux

package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/diskfull"
	"github.com/jobq/jobq/worker"
)

// awaitLog waits for a message containing one of ss; the deadline only
// keeps a broken worker from hanging the test.
func awaitLog(t *testing.T, logs *logRecorder, ss ...string) {
	t.Helper()
	done := make(chan struct{}, len(ss))
	for _, s := range ss {
		go func() { logs.waitFor(s); done <- struct{}{} }()
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		logs.mu.Lock()
		seen := append([]string(nil), logs.msgs...)
		logs.mu.Unlock()
		t.Fatalf("none of the log messages %q within a minute; logged: %q", ss, seen)
	}
}

// TestDiskFullPausesAndResumes runs tasks on SQLite on a small tmpfs and
// fills it while two run: their completions are refused (SQLITE_FULL), so
// the worker pauses, retrying them, and once space is freed it completes
// them and runs the rest. Every task runs once: none is left leased to run
// again after its lease expires.
func TestDiskFullPausesAndResumes(t *testing.T) {
	t.Parallel()
	dir := diskfull.SmallDisk(t, 4<<20)
	q, err := jobq.OpenWithOptions(context.Background(), "sqlite://"+filepath.Join(dir, "q.db")+"?queue=full", jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	const n = 6
	for i := range n {
		push(t, q, &jobq.Task{Command: fmt.Sprintf("task %d", i)})
	}

	var mu sync.Mutex
	runs := map[string]int{}
	started := make(chan struct{}, n)
	release := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		mu.Lock()
		runs[job.Task.Command]++
		mu.Unlock()
		started <- struct{}{}
		<-release
		return nil
	})
	logs := newLogRecorder()
	w := worker.New(q, h, worker.Options{Concurrency: 2, Prefetch: -1, Logger: logs.logger(), Poll: 50 * time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()

	<-started
	<-started
	filler := diskfull.Fill(t, dir)
	close(release) // the two running tasks end; their completions hit the full disk
	// (A worker that does not pause gives up the completion instead.)
	awaitLog(t, logs, "the engine refuses writes", "could not be completed")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}

	if got := logs.count("the engine refuses writes"); got != 1 {
		t.Errorf("the pause was logged %d times; want once", got)
	}
	if got := logs.count("the engine accepts writes again"); got != 1 {
		t.Errorf("the resumption was logged %d times; want once", got)
	}
	for cmd, k := range runs {
		if k != 1 {
			t.Errorf("%s ran %d times; want once", cmd, k)
		}
	}
	if len(runs) != n || w.Counts().Done != n {
		t.Errorf("%d tasks ran, %d done; want %d", len(runs), w.Counts().Done, n)
	}
	if size, err := q.Admin().Size(context.Background()); err != nil || size != 0 {
		t.Errorf("queue size %d (%v) after the run; want 0", size, err)
	}
}

// TestDiskFullBeforeStartWaits: with the disk already full, every receive
// is refused (SQLITE_FULL). The worker keeps trying for as long as that
// lasts, past the time after which other receive failures end it, logging
// once; once space is freed it runs the queue.
func TestDiskFullBeforeStartWaits(t *testing.T) {
	t.Parallel()
	dir := diskfull.SmallDisk(t, 4<<20)
	q, err := jobq.OpenWithOptions(context.Background(), "sqlite://"+filepath.Join(dir, "q.db")+"?queue=full", jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	const n = 3
	for i := range n {
		push(t, q, &jobq.Task{Command: fmt.Sprintf("task %d", i)})
	}
	filler := diskfull.Fill(t, dir)

	logs := newLogRecorder()
	var mu sync.Mutex
	runs := map[string]int{}
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		mu.Lock()
		defer mu.Unlock()
		runs[job.Task.Command]++
		return nil
	})
	w := worker.New(q, h, worker.Options{Logger: logs.logger(), Poll: 50 * time.Millisecond})
	worker.SetReceiveGiveUp(w, 200*time.Millisecond)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()

	// Keep the disk full well past the give-up time.
	select {
	case err := <-errc:
		t.Fatalf("Run returned while the disk was full: %v; want it to wait", err)
	case <-time.After(time.Second):
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := logs.count("the engine refuses writes"); got != 1 {
		t.Errorf("the refusal was logged %d times; want once", got)
	}
	if got := logs.count("the engine accepts writes again"); got != 1 {
		t.Errorf("the resumption was logged %d times; want once", got)
	}
	if len(runs) != n || w.Counts().Done != n {
		t.Errorf("%d tasks ran, %d done; want %d", len(runs), w.Counts().Done, n)
	}
}

// TestDiskFullPastTheLeaseRunsAgain: a completion refused for longer than
// the task's lease is given up (the renewals are refused too, and then the
// lease is gone), and the task runs again once the disk has room: a
// duplicate, never a loss.
func TestDiskFullPastTheLeaseRunsAgain(t *testing.T) {
	t.Parallel()
	dir := diskfull.SmallDisk(t, 4<<20)
	q, err := jobq.OpenWithOptions(context.Background(), "sqlite://"+filepath.Join(dir, "q.db")+"?queue=full", jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	push(t, q, &jobq.Task{Command: "the task"})

	var mu sync.Mutex
	runs := 0
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		mu.Lock()
		runs++
		mu.Unlock()
		started <- struct{}{}
		<-release
		return nil
	})
	logs := newLogRecorder()
	w := worker.New(q, h, worker.Options{Visibility: 2 * time.Second, Logger: logs.logger(), Poll: 50 * time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()

	<-started
	unpin := diskfull.PinWAL(t, filepath.Join(dir, "q.db"))
	filler := diskfull.Fill(t, dir)
	close(release)
	awaitLog(t, logs, "could not be completed")
	unpin()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if runs != 2 || w.Counts().Done != 1 {
		t.Errorf("the task ran %d times, %d done; want it run again after the lease expired, and done once", runs, w.Counts().Done)
	}
	if size, err := q.Admin().Size(context.Background()); err != nil || size != 0 {
		t.Errorf("queue size %d (%v) after the run; want 0", size, err)
	}
}
