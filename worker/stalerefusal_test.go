package worker_test

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/worker"
)

// refusingDriver is a mem driver whose n-th receive and n-th completion
// (from 1) first call onReceive and onComplete; a non-nil error refuses
// the call.
type refusingDriver struct {
	*mem.Driver
	onReceive, onComplete func(n int) error

	mu                  sync.Mutex
	receives, completes int
}

func (d *refusingDriver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	d.mu.Lock()
	d.receives++
	n := d.receives
	d.mu.Unlock()
	if err := d.onReceive(n); err != nil {
		return nil, err
	}
	return d.Driver.Receive(ctx, p)
}

func (d *refusingDriver) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	d.mu.Lock()
	d.completes++
	n := d.completes
	d.mu.Unlock()
	if err := d.onComplete(n); err != nil {
		return driver.FanOut(err, len(reqs))
	}
	return d.Driver.Complete(ctx, reqs)
}

// diskFullError is a refusal as a full disk's.
var diskFullError = driver.Errorf(errcode.ResourceExhausted, "database or disk is full")

// within waits for ch; the deadline only keeps a broken worker from
// hanging the test.
func within(t *testing.T, ch <-chan struct{}, what string) {
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Errorf("%s did not come within a minute", what)
	}
}

// runRefusing runs a worker, one task at a time, over two tasks on d,
// and checks that the refusals d's hooks make are logged as one pause.
func runRefusing(t *testing.T, d *refusingDriver, logs *logRecorder) {
	t.Helper()
	q, err := jobq.New(d, jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	push(t, q, &jobq.Task{Command: "task 1"}, &jobq.Task{Command: "task 2"})
	var mu sync.Mutex
	runs := map[string]int{}
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		mu.Lock()
		defer mu.Unlock()
		runs[job.Task.Command]++
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 1, Prefetch: -1, Logger: logs.logger(), Poll: 50 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := logs.count("the engine refuses writes"); got != 1 {
		t.Errorf("the pause was logged %d times; want once", got)
	}
	if got := logs.count("the engine accepts writes again"); got != 1 {
		t.Errorf("the resumption was logged %d times; want once", got)
	}
	if len(runs) != 2 || runs["task 1"] != 1 || runs["task 2"] != 1 || w.Counts().Done != 2 {
		t.Errorf("runs %v, %d done; want each of the two tasks run once, and done", runs, w.Counts().Done)
	}
}

// newRefusingDriver returns a refusingDriver on a queue of its own, and a
// channel closed once the worker logs the end of a pause.
func newRefusingDriver(t *testing.T, logs *logRecorder) (*refusingDriver, <-chan struct{}) {
	t.Helper()
	m, err := mem.New(mem.Options{Queue: "refusing-" + rand.Text()})
	if err != nil {
		t.Fatal(err)
	}
	resumed := make(chan struct{})
	go func() { logs.waitFor("the engine accepts writes again"); close(resumed) }()
	return &refusingDriver{Driver: m}, resumed
}

// TestReceiveRefusedBeforeAPauseEnded: a receive that began while the
// disk was full is refused only after a retried completion went through
// and ended the pause. The engine took a write since the receive began,
// so its refusal is no news: the worker receives again at once, and logs
// no second pause (it did, and took no task for the receive's backoff).
func TestReceiveRefusedBeforeAPauseEnded(t *testing.T) {
	t.Parallel()
	logs := newLogRecorder()
	d, resumed := newRefusingDriver(t, logs)
	received := make(chan struct{})
	d.onReceive = func(n int) error {
		if n != 2 {
			return nil
		}
		close(received)
		within(t, resumed, "the end of the pause")
		return diskFullError
	}
	d.onComplete = func(n int) error {
		if n != 1 {
			return nil
		}
		within(t, received, "the second receive")
		return diskFullError
	}
	runRefusing(t, d, logs)
}

// TestCompletionRefusedBeforeAPauseEnded: a completion that began while
// the disk was full is refused only after a receive went through and
// ended the pause that a refused receive began. The completion is made
// again at once, and no second pause is logged (it was, and the worker
// took no task until the completion's backoff ran out).
func TestCompletionRefusedBeforeAPauseEnded(t *testing.T) {
	t.Parallel()
	logs := newLogRecorder()
	d, resumed := newRefusingDriver(t, logs)
	completing := make(chan struct{})
	d.onComplete = func(n int) error {
		if n != 1 {
			return nil
		}
		close(completing)
		within(t, resumed, "the end of the pause")
		return diskFullError
	}
	d.onReceive = func(n int) error {
		if n != 2 {
			return nil
		}
		within(t, completing, "the first completion")
		return diskFullError
	}
	runRefusing(t, d, logs)
}
