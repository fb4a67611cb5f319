package sqlite

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// Group commit. Concurrent write operations of one driver (claims from many
// worker slots, batched completions, pushes) are run together in one
// immediate transaction: whoever takes the write semaphore leads and runs
// every operation queued at that moment, each inside its own savepoint, so
// each stays atomic on its own, and one COMMIT covers them all. A commit
// (WAL frame writes and file locks) is most of an operation's cost, so under
// concurrency this multiplies throughput; alone, an operation runs in its
// own transaction as before.

// maxGroup bounds how many operations share a transaction, so that the
// file's write lock is never held long.
const maxGroup = 64

// Request states.
const (
	reqPending   int32 = iota // queued, not started
	reqTaken                  // a leader runs it; its result will arrive
	reqAbandoned              // the caller gave up before it started
)

type writeReq struct {
	ctx   context.Context
	fn    func(tx wtx) error
	state atomic.Int32
	done  chan error // receives the result once; buffered
}

// writeQueue holds the operations waiting for a leader.
type writeQueue struct {
	mu      sync.Mutex
	pending []*writeReq
	// shared is whether the last group ran more than one operation.
	shared atomic.Bool
}

func (q *writeQueue) add(r *writeReq) {
	q.mu.Lock()
	q.pending = append(q.pending, r)
	q.mu.Unlock()
}

// take removes up to maxGroup queued operations that nobody abandoned, and
// marks them taken.
func (q *writeQueue) take() []*writeReq {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*writeReq
	n := 0
	for n < len(q.pending) && len(out) < maxGroup {
		r := q.pending[n]
		n++
		if r.state.CompareAndSwap(reqPending, reqTaken) {
			out = append(out, r)
		}
	}
	rest := copy(q.pending, q.pending[n:])
	clear(q.pending[rest:])
	q.pending = q.pending[:rest]
	return out
}

// writeTx runs fn in an immediate transaction (possibly shared with other
// operations, see above) and returns its error or the commit's. A fn that
// fails changes nothing.
func (d *Driver) writeTx(ctx context.Context, op string, fn func(tx wtx) error) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	d.queue.add(r)
	for {
		select {
		case err := <-r.done:
			return d.wrap(ctx, op, err)
		default:
		}
		select {
		case err := <-r.done:
			return d.wrap(ctx, op, err)
		case <-ctx.Done():
			if r.state.CompareAndSwap(reqPending, reqAbandoned) {
				return ctxErr(ctx.Err())
			}
			// A leader is running it: the result follows promptly.
			return d.wrap(ctx, op, <-r.done)
		case <-d.closing.Done():
			if r.state.CompareAndSwap(reqPending, reqAbandoned) {
				return d.closing.Err()
			}
			return d.wrap(ctx, op, <-r.done)
		case d.writeSem <- struct{}{}:
			if r.state.Load() == reqPending {
				d.lead(r)
			}
			<-d.writeSem
		}
	}
}

// lead runs a group as the holder of writeSem. BEGIN, the one step that can
// wait (for another process's write lock), watches the leader's context;
// only after it succeeds are the queued operations taken, so the others can
// still give up while the leader waits.
func (d *Driver) lead(own *writeReq) {
	select {
	case <-d.closing.Done():
		return // the waiting callers see closed
	default:
	}
	if err := d.w.begin(own.ctx, d.closing); err != nil {
		if own.state.CompareAndSwap(reqPending, reqTaken) {
			own.done <- err
		}
		return
	}
	// Let goroutines that are about to queue an operation (the other
	// worker slots, woken by the same completion flush) do so, so that they
	// join this transaction instead of each paying for a commit; but only
	// when the last group had company: a lone caller (one receiver, one
	// task at a time) paid for the yield on every transaction (4 % of its
	// CPU) and gained nothing. Company that arrives later joins the next
	// group, which then yields again.
	if d.queue.shared.Load() {
		runtime.Gosched()
	}
	group := d.queue.take()
	d.queue.shared.Store(len(group) > 1)
	errs := d.w.runGroup(group)
	for i, r := range group {
		r.done <- errs[i]
	}
}
