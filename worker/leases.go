package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
)

// leaseKeeper renews the leases of the tasks a worker holds, every half
// lease, from one goroutine for the whole worker: a task is held from its
// receipt until just before it is settled. Goroutines and timers of its
// own for each task would be a large share of the worker's time on short
// tasks, and almost every task ends long before its first renewal. The
// renewals themselves run one goroutine each, so that a slow one delays no
// other.
//
// It also ends the held tasks' contexts when the worker stops (stopAll).
// A task's context is not made from a context that Stop cancels: each
// would be added to that context's children and taken out again, under a
// lock shared by every handler of the worker.
type leaseKeeper struct {
	w    *Worker
	wake chan struct{} // a lease came due sooner than the loop's timer

	mu      sync.Mutex
	held    map[*jobq.Envelope]*heldLease
	next    time.Time // when the loop wakes next; zero when it has no timer
	stopped error     // the cause stopAll ended the tasks with; nil before
}

// heldLease is one held task's renewal state.
type heldLease struct {
	// ctx is the task's. Renewals run under it without its cancellation:
	// a cancel request ends it while the handler may still take a while
	// to stop, and the lease must last until then. release ends a renewal
	// in flight instead (stop).
	ctx context.Context
	end context.CancelCauseFunc // ends ctx
	log *slog.Logger
	due time.Time // when to renew next
	off bool      // no more renewals: unsupported, or the lease is gone
	// renewing is set while a renewal runs and closed when it ends; stop
	// ends that renewal's context.
	renewing chan struct{}
	stop     context.CancelFunc
}

func newLeaseKeeper(w *Worker) *leaseKeeper {
	return &leaseKeeper{w: w, wake: make(chan struct{}, 1), held: make(map[*jobq.Envelope]*heldLease)}
}

// hold starts renewing env's lease (unless heartbeats are off) until
// release, with h, the task's own (taskRun), as its renewal state; ctx is
// the task's context, which end ends, now if the worker has stopped.
func (k *leaseKeeper) hold(ctx context.Context, end context.CancelCauseFunc, h *heldLease, env *jobq.Envelope, log *slog.Logger) {
	*h = heldLease{ctx: ctx, end: end, log: log, off: k.w.o.DisableHeartbeat}
	if !h.off {
		h.due = time.Now().Add(k.w.renewal(env))
	}
	k.mu.Lock()
	k.held[env] = h
	sooner := !h.off && (k.next.IsZero() || h.due.Before(k.next))
	stopped := k.stopped
	k.mu.Unlock()
	if stopped != nil {
		end(stopped)
	}
	if sooner {
		k.poke()
	}
}

// stopAll ends the contexts of the tasks held, and of those held from now
// on, with cause.
func (k *leaseKeeper) stopAll(cause error) {
	k.mu.Lock()
	if k.stopped != nil {
		k.mu.Unlock()
		return
	}
	k.stopped = cause
	ends := make([]context.CancelCauseFunc, 0, len(k.held))
	for _, h := range k.held {
		ends = append(ends, h.end)
	}
	k.mu.Unlock()
	for _, end := range ends {
		end(cause)
	}
}

// release stops renewing env's lease and waits for a renewal in flight,
// cutting it short, so that the settlement that follows uses the newest
// lease.
func (k *leaseKeeper) release(env *jobq.Envelope) {
	k.mu.Lock()
	h := k.held[env]
	delete(k.held, env)
	var inFlight chan struct{}
	if h != nil && h.renewing != nil {
		inFlight = h.renewing
		h.stop()
	}
	k.mu.Unlock()
	if inFlight != nil {
		<-inFlight
	}
}

func (k *leaseKeeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// run starts the renewals that are due and sleeps until the next one, until
// done is closed.
func (k *leaseKeeper) run(done <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		now := time.Now()
		var next time.Time
		k.mu.Lock()
		for env, h := range k.held {
			switch {
			case h.off || h.renewing != nil:
			case !h.due.After(now):
				var ctx context.Context
				ctx, h.stop = context.WithCancel(context.WithoutCancel(h.ctx))
				h.renewing = make(chan struct{})
				go k.renew(ctx, env, h)
			case next.IsZero() || h.due.Before(next):
				next = h.due
			}
		}
		k.next = next
		k.mu.Unlock()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-timer.C:
		case <-k.wake:
			timer.Stop()
		case <-done:
			return
		}
	}
}

// renew renews one lease under ctx and schedules the next renewal. A lost
// lease cancels the task through its context (jobq.Envelope.Context).
func (k *leaseKeeper) renew(ctx context.Context, env *jobq.Envelope, h *heldLease) {
	err := env.Renew(ctx, 0)
	var due time.Time
	off := false
	switch {
	case err == nil:
		h.log.Debug("lease renewed", "expiry", env.Expiry())
		due = time.Now().Add(k.w.renewal(env))
	case ctx.Err() != nil, errors.Is(err, errcode.LockLost):
		off = true
	case errors.Is(err, errcode.Unimplemented):
		h.log.Warn("this backend cannot renew leases; the task must finish within the visibility timeout", "error", err)
		off = true
	default:
		// Try again well before the lease runs out.
		h.log.Warn("lease renewal failed; trying again shortly", "error", err)
		due = time.Now().Add(k.w.renewal(env) / 5)
	}
	k.mu.Lock()
	ch := h.renewing
	h.stop()
	h.renewing, h.stop, h.due, h.off = nil, nil, due, off
	k.mu.Unlock()
	close(ch)
	k.poke()
}
