package worker

import (
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// Prefetching: a task's handler slot is busy from the moment its receive
// starts until its handler returns, so with fast handlers a worker holding
// only Concurrency tasks spends much of each slot's time waiting for a
// claim's round trip, and its claims are small. While recent handlers have
// been fast, receives may claim up to Options.Prefetch tasks beyond the free
// handlers (four times Concurrency by default); those wait, in claim order, for
// a handler. Slow handlers switch it off, so a worker running long tasks
// never holds tasks that an idle worker elsewhere could run.

// prefetchFastBelow is the mean handler duration under which a worker
// prefetches. A prefetched task waits at most about Prefetch/Concurrency
// handler durations (two, by default), so below this the wait is
// negligible, while the claim round trip it hides (a millisecond on a local
// database, tens on a cloud queue) is not.
const prefetchFastBelow = 50 * time.Millisecond

// handlerPace tracks a moving average of handler durations, and signals
// receivers waiting for a free handler when handlers turn fast, so that
// they take prefetch tokens from then on instead of waiting on.
type handlerPace struct {
	fastBelow time.Duration // prefetchFastBelow; a test may set another bar

	mu     sync.Mutex
	mean   time.Duration // 0 until the first task ends
	turned chan struct{} // closed, and replaced, when the mean turns fast
}

func newHandlerPace() *handlerPace {
	return &handlerPace{fastBelow: prefetchFastBelow, turned: make(chan struct{})}
}

// observe adds one handler duration to the average (weight 1/8).
func (p *handlerPace) observe(d time.Duration) {
	d = max(d, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	wasFast := p.isFast()
	if p.mean == 0 {
		p.mean = d
	} else {
		p.mean = max(p.mean+(d-p.mean)/8, 1)
	}
	if !wasFast && p.isFast() {
		close(p.turned)
		p.turned = make(chan struct{})
	}
}

func (p *handlerPace) isFast() bool { return p.mean != 0 && p.mean < p.fastBelow }

// state reports whether handlers have been fast enough to prefetch for (not
// before the first task has ended) and, when they have not, a channel closed
// when they turn fast.
func (p *handlerPace) state() (fast bool, turned <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isFast() {
		return true, nil
	}
	return false, p.turned
}

// claimTokens are the tokens one receive holds: main ones stand for free
// handlers, ahead ones for prefetched tasks.
type claimTokens struct{ main, ahead int }

func (t claimTokens) total() int { return t.main + t.ahead }

// giveBack returns k of t's tokens to the pools, prefetch ones first, and
// returns what t keeps.
func (d *dispatcher) giveBack(t claimTokens, k int) claimTokens {
	a := min(k, t.ahead)
	for range a {
		d.ahead <- struct{}{}
	}
	d.give(k - a)
	return claimTokens{main: t.main - (k - a), ahead: t.ahead - a}
}

// aheadPool is the prefetch token pool while handlers are fast, else nil (a
// nil channel is never ready in a select); turned is then closed when they
// turn fast, for a receiver waiting on the pool to look again (nil without
// prefetch).
func (d *dispatcher) aheadPool() (pool chan struct{}, turned <-chan struct{}) {
	if d.ahead == nil {
		return nil, nil
	}
	if fast, turned := d.w.pace.state(); !fast {
		return nil, turned
	}
	return d.ahead, nil
}

// awaitHandler waits for t to hold a handler: a prefetched task may have
// to wait for one, and a task received before a failure pause began waits
// the pause out (tasks failing in a row pause the worker before it starts
// more work); the worker's lease keeper renews the task's lease meanwhile.
// It returns errDraining when the worker drains first and errLeaseLost
// when the lease is lost meanwhile; the task must not start then, and t
// has been released.
func (w *Worker) awaitHandler(env *jobq.Envelope, t *handlerTicket) error {
	held := false
	select {
	case <-t.granted:
		if w.pauser.left() <= 0 && !w.draining() {
			return nil
		}
		held = true
	default:
	}
	giveUp := func(err error) error {
		t.release()
		return err
	}
	if !held {
		select {
		case <-t.granted:
		case <-w.drainCh:
			return giveUp(errDraining)
		case <-env.LockLost():
			return giveUp(errLeaseLost)
		}
	}
	for {
		// Drained while waiting (a failure past the limit drains before
		// it frees its handler)?
		if w.draining() {
			return giveUp(errDraining)
		}
		left := w.pauser.left()
		if left <= 0 {
			return nil
		}
		timer := time.NewTimer(left)
		select {
		case <-timer.C:
		case <-w.drainCh:
			timer.Stop()
			return giveUp(errDraining)
		case <-env.LockLost():
			timer.Stop()
			return giveUp(errLeaseLost)
		}
	}
}

// draining reports whether Drain (or Stop) has been called.
func (w *Worker) draining() bool {
	select {
	case <-w.drainCh:
		return true
	default:
		return false
	}
}
