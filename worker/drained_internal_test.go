package worker

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
)

// sweepAfterStats is a mem driver that runs after once, right after the
// first Stats read: a sweep of the worker's background loop between the
// drained check's stats and its own sweep.
type sweepAfterStats struct {
	*mem.Driver
	once  sync.Once
	after func()
}

func (d *sweepAfterStats) Stats(ctx context.Context) (driver.Stats, error) {
	st, err := d.Driver.Stats(ctx)
	d.once.Do(d.after)
	return st, err
}

// TestDrainedSeesAReleaseItLostToTheLoop: a held task that the worker's
// background loop releases after the drained check read the stats keeps
// the worker running, though the check's own sweep finds it gone. (The
// check said drained, and a worker without --wait ended with the task
// queued and nobody to run it: cli TestPushAfter's third task, now and
// then.)
func TestDrainedSeesAReleaseItLostToTheLoop(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, err := mem.New(mem.Options{Queue: "drained-race-" + rand.Text()})
	if err != nil {
		t.Fatal(err)
	}
	d := &sweepAfterStats{Driver: m}
	q, err := jobq.New(d, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	parent, err := q.Push(ctx, &jobq.Task{Command: "echo parent"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo child", After: []string{parent.ID}}); err != nil {
		t.Fatal(err)
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || e.Task.ID != parent.ID {
		t.Fatalf("receive = %v, %v; want the parent", e, err)
	}
	if err := e.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	w := New(q, HandlerFunc(func(context.Context, *Job) error { return nil }), Options{Logger: slog.New(slog.DiscardHandler)})
	var loopReleased []string
	d.after = func() { loopReleased, _, _, _ = w.sweeps.sweep(ctx, q, nil) }
	if w.drained() {
		t.Errorf("drained with the child released meanwhile (by the loop: %v); want not drained", loopReleased)
	}
	if len(loopReleased) != 1 {
		t.Fatalf("the loop's sweep released %v; the check needs it to release the child", loopReleased)
	}
}
