package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq/worker/preempt"
)

// preemptKillMargin is how long before a preemption deadline the worker
// kills the tasks still running, which leaves time to requeue them before
// the machine goes.
const preemptKillMargin = 10 * time.Second

// ackTimeout bounds acknowledging a preemption notice.
const ackTimeout = 10 * time.Second

// watchPreemption waits for a preemption notice until ctx ends. On one it
// stops the worker, as SIGTERM does, and kills the tasks still running
// preemptKillMargin before the notice's deadline (at once when it has
// none).
func (w *Worker) watchPreemption(ctx context.Context) {
	n, err := w.o.Preemption.Watch(ctx)
	if err != nil || n == nil {
		return
	}
	w.mu.Lock()
	w.notice = n
	w.mu.Unlock()
	w.end("preempted: " + n.String())
	attrs := []any{"notice", n.String()}
	if n.Description != "" {
		attrs = append(attrs, "description", n.Description)
	}
	killIn := time.Duration(0)
	if !n.Deadline.IsZero() {
		left := time.Until(n.Deadline)
		killIn = max(0, left-preemptKillMargin)
		attrs = append(attrs, "deadline_in", left.Round(time.Second))
	}
	w.log.Warn("preemption notice: this machine is going away; taking no new tasks, stopping the running ones and requeueing them (no retry used)", attrs...)
	w.Stop()
	t := time.NewTimer(killIn)
	defer t.Stop()
	select {
	case <-t.C:
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if running > 0 {
			w.log.Warn("preemption deadline near: killing the tasks still running; they are requeued", "running", running)
		}
		w.Kill()
	case <-ctx.Done():
	}
}

// preempted returns the notice that stopped the worker, if one did.
func (w *Worker) preempted() *preempt.Notice {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.notice
}

// acknowledge tells the platform the machine is ready to go, now that the
// running tasks are requeued, and returns the error Run returns.
func (w *Worker) acknowledge(n *preempt.Notice) error {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := n.Ack(ctx); err != nil {
		w.log.Warn("could not acknowledge the preemption notice; the machine goes at its deadline instead", "notice", n.String(), "error", err)
	} else if n.ID != "" {
		w.log.Info("preemption notice acknowledged: the machine may go now", "notice", n.String())
	}
	return fmt.Errorf("%w (%s); the running tasks were requeued", ErrPreempted, n)
}
