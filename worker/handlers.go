package worker

import "sync"

// handlerQueue hands the worker's handlers to received tasks in claim order.
// A task takes a ticket as soon as it is received, in the receiving
// goroutine, so a task received earlier (higher priority, or pushed
// earlier) is never overtaken by one received after it, however the
// goroutines running them are scheduled.
type handlerQueue struct {
	mu      sync.Mutex
	free    int              // handlers not held by any ticket
	waiting []*handlerTicket // tickets without a handler, oldest first
}

// handlerTicket is one task's place in the handlerQueue.
type handlerTicket struct {
	q       *handlerQueue
	granted chan struct{} // closed when the ticket holds a handler
	held    bool          // under q.mu: holds a handler
	done    bool          // under q.mu: released or withdrawn
}

func newHandlerQueue(handlers int) *handlerQueue { return &handlerQueue{free: handlers} }

// take queues a ticket, which holds a handler at once if one is free.
func (q *handlerQueue) take() *handlerTicket {
	t := new(handlerTicket)
	q.join(t)
	return t
}

// join makes t, a zero ticket, a ticket of q (queued, or holding a handler
// at once if one is free), as take does; the worker keeps a task's ticket
// in the task's own state (taskRun).
func (q *handlerQueue) join(t *handlerTicket) {
	*t = handlerTicket{q: q}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.free > 0 && len(q.waiting) == 0 {
		// Granted at once: no channel of its own to close.
		q.free--
		t.held, t.granted = true, grantedNow
		return
	}
	t.granted = make(chan struct{})
	q.waiting = append(q.waiting, t)
}

// grantedNow is the granted channel of every ticket that held a handler as
// it joined the queue: closed already.
var grantedNow = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// grant gives t a handler; q.mu is held.
func (t *handlerTicket) grant() {
	t.held = true
	close(t.granted)
}

// release gives up t's handler, to the oldest waiting ticket or back to the
// pool, or withdraws t from the queue if it has none yet. It may be called
// more than once.
func (t *handlerTicket) release() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	if !t.held {
		for i, w := range q.waiting {
			if w == t {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				break
			}
		}
		return
	}
	if len(q.waiting) == 0 {
		q.free++
		return
	}
	next := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	next.grant()
}
