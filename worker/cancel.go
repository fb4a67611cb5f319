package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// ErrCancelled matches (with errors.Is) the cause of a task's context when
// the task was cancelled (Admin.Cancel) while it ran. The worker then
// settles it as cancelled, whatever its handler returns: not retried, not
// counted as a failure.
var ErrCancelled = errors.New("task cancelled")

// defaultCancelPoll is the default Options.CancelPoll.
const defaultCancelPoll = 5 * time.Second

// cancelLookupTimeout bounds one lookup of the cancel requests.
const cancelLookupTimeout = 30 * time.Second

// running holds the tasks whose handlers run, with the function that stops
// each, so that a cancel request can reach them. It is keyed by envelope:
// one task ID may run twice here (a redelivery while an expired lease still
// runs), and a cancel stops both.
type running struct {
	mu    sync.Mutex
	tasks map[*jobq.Envelope]context.CancelCauseFunc
}

// track registers env as running: a cancel request for it calls cancel
// with cause ErrCancelled, which ends the task's own context (one context
// per task, not a second one for cancels).
// Call untrack when the handler returns.
func (r *running) track(env *jobq.Envelope, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	if r.tasks == nil {
		r.tasks = make(map[*jobq.Envelope]context.CancelCauseFunc)
	}
	r.tasks[env] = cancel
	r.mu.Unlock()
}

// untrack unregisters env.
func (r *running) untrack(env *jobq.Envelope) {
	r.mu.Lock()
	delete(r.tasks, env)
	r.mu.Unlock()
}

// ids returns the IDs of the running tasks, each once, and when each
// one's message was pushed.
func (r *running) ids() (ids []string, pushed []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids = make([]string, 0, len(r.tasks))
	pushed = make([]time.Time, 0, len(r.tasks))
	seen := make(map[string]bool, len(r.tasks))
	for env := range r.tasks {
		if id := env.Task.ID; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
			pushed = append(pushed, env.EnqueuedAt)
		}
	}
	return ids, pushed
}

// stop cancels the running tasks whose ID is in ids, with cause
// ErrCancelled, and returns the IDs it reached.
func (r *running) stop(ids []string) []string {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var reached []string
	r.mu.Lock()
	defer r.mu.Unlock()
	for env, cancel := range r.tasks {
		if want[env.Task.ID] {
			cancel(ErrCancelled)
			reached = append(reached, env.Task.ID)
		}
	}
	return reached
}

// cancelsRunning reports whether the worker asks about cancel requests for
// its running tasks: CancelPoll is not negative and the backend keeps
// cancel requests.
func (w *Worker) cancelsRunning() bool {
	return w.o.CancelPoll > 0 && w.q.Capabilities().Level(driver.Cancel) != driver.Unsupported
}

// cancelLoop asks, every CancelPoll, whether a cancel was requested for any
// running task, and stops those, until stop is closed.
func (w *Worker) cancelLoop(stop <-chan struct{}) {
	t := time.NewTicker(w.o.CancelPoll)
	defer t.Stop()
	failing := false // log a run of failed lookups once
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		ids, pushed := w.inflight.ids()
		if len(ids) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), cancelLookupTimeout)
		requested, err := hooks.CancelRequestedOf(ctx, w.q, ids, pushed)
		cancel()
		switch {
		case errcode.Of(err) == errcode.Unimplemented:
			w.log.Warn("this backend cannot tell which tasks are cancelled; running tasks will not be stopped by a cancel", "error", err)
			return
		case err != nil:
			if !failing {
				w.log.Warn("could not look up cancel requests for the running tasks; trying again", "error", err, "every", w.o.CancelPoll)
			}
			failing = true
			continue
		}
		if failing {
			w.log.Info("cancel requests can be looked up again")
			failing = false
		}
		for _, id := range w.inflight.stop(requested) {
			taskLogger(w.log, id).Info("cancel requested: stopping the task")
		}
	}
}

// cancelRequestedOf returns the received tasks whose cancel was requested:
// the worker drops them unrun. One lookup of the records covers the whole
// received batch; when it fails the tasks run (and cancelLoop may still
// stop them). Where the backend cannot remove a queued task by ID (Cancel
// Emulated) every received task is looked up. Where Cancel is Native only
// the redelivered ones are, so a first delivery costs no records round
// trip: Queue.Cancel removes a queued task and records its end in one
// step, and records a request only for a task in flight (cancelLoop stops
// it where it runs), so a task with a request was delivered before: its
// worker died, or its lease expired, before it saw the request.
func (w *Worker) cancelRequestedOf(envs []*jobq.Envelope) map[*jobq.Envelope]bool {
	level := w.q.Capabilities().Level(driver.Cancel)
	if level == driver.Unsupported {
		return nil
	}
	// Built only for the tasks looked up: on a native backend, only those
	// delivered again, so most receives allocate nothing here.
	var ids []string
	var pushed []time.Time
	for _, env := range envs {
		if level == driver.Emulated || env.DeliveryCount > 1 && w.o.CancelPoll > 0 {
			ids = append(ids, env.Task.ID)
			pushed = append(pushed, env.EnqueuedAt)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelLookupTimeout)
	requested, err := hooks.CancelRequestedOf(ctx, w.q, ids, pushed)
	cancel()
	if err != nil {
		w.log.Warn("could not look up cancel requests for the received tasks; running them", "error", err)
		return nil
	}
	if len(requested) == 0 {
		return nil
	}
	want := make(map[string]bool, len(requested))
	for _, id := range requested {
		want[id] = true
	}
	drop := make(map[*jobq.Envelope]bool, len(requested))
	for _, env := range envs {
		if want[env.Task.ID] {
			drop[env] = true
		}
	}
	return drop
}

// cancel settles a cancelled task: its record says Cancelled, and it is
// neither retried nor counted as a failure. ran says whether its handler
// ran (from start, for elapsed): only then is the attempt recorded.
func (w *Worker) cancel(env *jobq.Envelope, log *slog.Logger, start time.Time, ran bool, elapsed time.Duration) {
	if ran {
		w.record(env, start, jobq.OutcomeCancelled, ErrCancelled)
	}
	err := w.settle(env, log, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, settleTimeout)
		defer cancel()
		return env.Cancel(ctx, cancelReason(ran, env.DeliveryCount))
	})
	if err != nil {
		log.Error("task cancelled but could not be settled; "+unsettledNote(err), "error", err, "elapsed", elapsed)
		w.emit(Event{Task: env.Task, Outcome: Cancelled, Err: ErrCancelled, SettleErr: err, Elapsed: elapsed})
		return
	}
	w.cancelled.Add(1)
	if ran {
		log.Info("task cancelled while running: stopped, not retried", "elapsed", elapsed)
	} else {
		log.Info("task cancelled before it ran (again): dropped", "delivery", env.DeliveryCount)
	}
	w.emit(Event{Task: env.Task, Outcome: Cancelled, Durable: true, Err: ErrCancelled, Elapsed: elapsed})
}

// cancelReason is the error a cancelled task's record shows; deliveries
// is the task's delivery count.
func cancelReason(ran bool, deliveries int) string {
	switch {
	case ran:
		return "cancelled while running: stopped by the worker"
	case deliveries > 1:
		return "cancelled while running on a worker that ended before it saw the request: dropped unrun by the worker that received it again"
	}
	return "cancelled before it ran: dropped by the worker"
}
