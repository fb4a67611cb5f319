package worker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// Outcome is how the worker settled a task.
type Outcome string

// The outcomes of an Event.
const (
	// Completed: the handler succeeded and the task was completed (deleted).
	Completed Outcome = "completed"
	// Retried: the handler failed and the task was put back with one retry
	// fewer.
	Retried Outcome = "retried"
	// DeadLettered: the handler failed with no retries left, or failed
	// permanently (Permanent, an unknown kind), and the task was moved to
	// the dead letters.
	DeadLettered Outcome = "dead-lettered"
	// Requeued: the task was put back without using a retry, because the
	// worker was stopping, its gate failed, or a concurrency or rate limit
	// was reached on this worker.
	Requeued Outcome = "requeued"
	// Cancelled: a cancel was requested for the task (Admin.Cancel); it
	// was stopped if it ran, or dropped unrun, and settled as cancelled:
	// not retried, not counted as a failure.
	Cancelled Outcome = "cancelled"
	// LockLost: the task's lease was lost, so the worker settled nothing;
	// another worker may run it. Never durable.
	LockLost Outcome = "lock-lost"
)

// Event reports one settlement of a task. See Worker.Subscribe.
type Event struct {
	// Task is the task as received. Treat it as read-only.
	Task *jobq.Task
	// Outcome is what the worker did with the task.
	Outcome Outcome
	// Durable is true when the engine acknowledged the settlement: the
	// event is sent after the call that stores it (for a completion, the
	// settler's batch holding it) returned without error, so a completion
	// with Durable set can no longer be undone by a crash of this process.
	// It is false for LockLost, and when the settlement could not be
	// stored, or its answer was lost (SettleErr says which): the task is
	// then delivered again once its lease expires, unless the unanswered
	// settlement was stored, so it may run twice but is never lost.
	Durable bool
	// Err is the handler's error for Retried and DeadLettered, why the
	// task was requeued for Requeued, and ErrCancelled for Cancelled; nil
	// for Completed.
	Err error
	// SettleErr is why the settlement was not stored, when Durable is false
	// for an outcome other than LockLost. As a *jobq.Error with
	// MaybeApplied set, it says that an attempt went unanswered: the
	// settlement may have been stored all the same (a retry then fails
	// with LockLost), and the task is delivered again only if it was not.
	SettleErr error
	// RetriesLeft is the task's retry budget after a Retried settlement.
	RetriesLeft int
	// Elapsed is how long the handler ran (zero when it never started).
	Elapsed time.Duration
}

// DefaultEventBuffer is the buffer of a subscription when Subscribe is
// given a size below 1.
const DefaultEventBuffer = 1024

// events fans settlement events out to the subscribers.
type events struct {
	mu     sync.Mutex
	subs   map[*subscription]struct{}
	closed bool
	n      atomic.Int32 // len(subs), read without mu so that emit costs nothing without subscribers
}

type subscription struct{ ch chan Event }

// Subscribe returns a channel that receives an Event for every task the
// worker settles from now on, and a function that ends the subscription
// (closing the channel; calling it again does nothing). The channel is also
// closed when Run returns, after the last settlement, so a caller can range
// over it; subscribe before calling Run, as a subscription made after Run
// returned gets a closed channel.
//
// The channel holds up to buffer events (DefaultEventBuffer when buffer is
// below 1). A subscriber that falls behind never slows the worker: an event
// that does not fit is dropped, and Counts().EventsDropped counts the
// drops, so read promptly or size the buffer for the bursts expected.
func (w *Worker) Subscribe(buffer int) (<-chan Event, func()) {
	if buffer < 1 {
		buffer = DefaultEventBuffer
	}
	s := &subscription{ch: make(chan Event, buffer)}
	e := &w.events
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	if e.subs == nil {
		e.subs = map[*subscription]struct{}{}
	}
	e.subs[s] = struct{}{}
	e.n.Store(int32(len(e.subs)))
	return s.ch, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if _, ok := e.subs[s]; ok {
			delete(e.subs, s)
			e.n.Store(int32(len(e.subs)))
			close(s.ch)
		}
	}
}

// emit sends ev to every subscriber that has room, and counts the others.
func (w *Worker) emit(ev Event) {
	e := &w.events
	if e.n.Load() == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.subs {
		select {
		case s.ch <- ev:
		default:
			w.eventsDropped.Add(1)
		}
	}
}

// closeEvents ends every subscription; Run calls it when it returns.
func (w *Worker) closeEvents() {
	e := &w.events
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for s := range e.subs {
		close(s.ch)
	}
	e.subs = nil
	e.n.Store(0)
}
