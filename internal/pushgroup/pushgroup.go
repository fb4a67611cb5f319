// Package pushgroup sends concurrent one-message pushes of one queue handle
// together (a group commit), for drivers whose batch push costs the engine
// much less per message than a push of one.
//
// A push that finds fewer than Options.MaxInFlight calls of its Group in
// flight goes out at once, alone, with its caller's context: no timer, no
// added latency. One that arrives while they are all in flight waits; when
// one of them returns, the waiting pushes go out together as one batch call
// (at most Options.MaxBatch of them, in arrival order), and each caller
// gets its own message's outcome. The goroutine whose call returned makes
// that call when its own push went alone (so the waiting callers are woken
// once, with their outcomes, and it returns one call later); after a batch
// call, the first of the waiting pushes is woken to make it. Either way the
// next call goes out before the callers of the one that returned are
// woken. The driver's batch push must treat its messages as if pushed one
// after the other (a second message with the first's task ID is a
// duplicate of it), so a caller sees what a lone push would have shown.
//
// A caller whose context ends while it waits is taken out of the group and
// returns the context's error: its message was not sent. Once its message
// is sent, a caller returns its outcome, or, if its context ends first, the
// context's error at once, as a lone push would: its message may then have
// been stored. (The caller that makes a call returns when the call does;
// one whose push went alone returns after the call it makes for the
// pushes that waited, if any, whatever its context.) The batch call runs
// until every one of its callers' contexts has ended.
package pushgroup

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// PushFunc is a driver's batch push (driver.Driver.Push).
type PushFunc func(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error)

// Options configure a Group.
type Options struct {
	// MaxBatch is the most messages one call carries. Defaults to 64.
	MaxBatch int
	// MaxBody is the largest body that joins a batch; a larger message is
	// pushed alone, at once, so that one oversized body cannot fail the
	// calls of others. Defaults to 64 KiB.
	MaxBody int
	// MaxInFlight is how many calls the group makes at once. Defaults to 1.
	MaxInFlight int
}

// Group coalesces the one-message pushes of one queue handle. Its methods
// are safe for concurrent use.
type Group struct {
	push                         PushFunc
	maxBatch, maxBody, maxFlight int

	mu      sync.Mutex
	flight  int     // calls in flight, counting a batch whose leader is waking
	waiting []*wait // pushes for the next call, in arrival order
}

// wait is one push waiting to be sent, and then for its outcome.
type wait struct {
	ctx context.Context
	msg *driver.Message
	// batch, set when the push is taken into a call (under Group.mu), is
	// nil for a member of a batch and the whole batch for its leader, the
	// batch's first push, whose goroutine makes the call.
	batch []*wait
	taken bool
	// done is closed when the outcome is in res and err, and for a leader
	// when it is to make the call.
	done chan struct{}
	res  driver.PushResult
	err  error
}

// New returns a Group that sends through push.
func New(push PushFunc, opts Options) *Group {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 64
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 64 << 10
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 1
	}
	return &Group{push: push, maxBatch: opts.MaxBatch, maxBody: opts.MaxBody, maxFlight: opts.MaxInFlight}
}

// Push pushes m, alone when fewer than MaxInFlight calls are in flight,
// otherwise in the next call with the other pushes waiting then (see the
// package comment).
func (g *Group) Push(ctx context.Context, m *driver.Message) (driver.PushResult, error) {
	if len(m.Body) > g.maxBody {
		return one(g.push(ctx, []*driver.Message{m}))
	}
	g.mu.Lock()
	if g.flight < g.maxFlight {
		g.flight++
		g.mu.Unlock()
		res, err := one(g.push(ctx, []*driver.Message{m}))
		if batch := g.take(false); batch != nil {
			g.send(batch, true)
		}
		return res, err
	}
	w := &wait{ctx: ctx, msg: m, done: make(chan struct{})}
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	select {
	case <-w.done:
	case <-ctx.Done():
		g.mu.Lock()
		taken, lead := w.taken, w.batch != nil
		if !taken {
			g.waiting = slices.DeleteFunc(g.waiting, func(o *wait) bool { return o == w })
		}
		g.mu.Unlock()
		switch {
		case !taken:
			return driver.PushResult{}, &driver.Error{Code: errcode.Of(ctx.Err()), Applied: driver.NotApplied,
				Msg: "push: the context ended while the task waited to be sent with other pushes; it was not sent: " + ctx.Err().Error(), Err: ctx.Err()}
		case lead:
			<-w.done // closed as the batch was taken: make the call
		default:
			select {
			case <-w.done:
			default:
				return driver.PushResult{}, &driver.Error{Code: errcode.Of(ctx.Err()), Applied: driver.MaybeApplied,
					Msg: "push: the context ended while the task's push was in flight; it may have been stored: " + ctx.Err().Error(), Err: ctx.Err()}
			}
		}
	}
	if w.batch != nil {
		g.send(w.batch, false)
	}
	return w.res, w.err
}

// Waiting returns how many pushes wait for a call.
func (g *Group) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// one returns the outcome of a push of one message.
func one(res []driver.PushResult, err error) (driver.PushResult, error) {
	if err != nil {
		return driver.PushResult{}, err
	}
	if len(res) != 1 {
		return driver.PushResult{}, driver.Errorf(errcode.Internal, "push returned %d results for 1 message", len(res))
	}
	return res[0], nil
}

// take ends a call: the pushes waiting, if any, are returned as the next
// call, which takes over its place in flight; with lead, its first push is
// made its leader (to be woken to make it). With none waiting, take returns
// nil and the call's place is free.
func (g *Group) take(lead bool) []*wait {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.waiting), g.maxBatch)
	if n == 0 {
		g.flight--
		return nil
	}
	batch := slices.Clone(g.waiting[:n])
	g.waiting = slices.Delete(g.waiting, 0, n)
	for _, w := range batch {
		w.taken = true
	}
	if lead {
		batch[0].batch = batch
	}
	return batch
}

// next ends a call: the pushes waiting, if any, become the next call, whose
// leader is woken to make it.
func (g *Group) next() {
	if batch := g.take(true); batch != nil {
		close(batch[0].done)
	}
}

// send makes one call for batch and hands each caller its outcome. When
// the call returns, the next one is started (next) before any caller is
// woken. With all, every caller of batch waits to be woken; otherwise the
// first is its leader, the goroutine making the call.
func (g *Group) send(batch []*wait, all bool) {
	if len(batch) == 1 {
		w := batch[0]
		w.res, w.err = one(g.push(w.ctx, []*driver.Message{w.msg}))
		g.next()
		if all {
			close(w.done)
		}
		return
	}
	ctx, stop := batchContext(batch)
	msgs := make([]*driver.Message, len(batch))
	for i, w := range batch {
		msgs[i] = w.msg
	}
	res, err := g.push(ctx, msgs)
	stop()
	g.next()
	for i, w := range batch {
		switch {
		case i < len(res):
			w.res = res[i]
		case err == nil:
			w.err = driver.Errorf(errcode.Internal, "push returned %d results for %d messages", len(res), len(batch))
		case refused(err) && len(batch)-len(res) > 1:
			// A max-depth refusal stored none of the rest, and whether
			// each fits depends on the ones before it: push them one at a
			// time, as they would have gone without the group.
			w.res, w.err = one(g.push(w.ctx, []*driver.Message{w.msg}))
		default:
			w.err = err
		}
		if i > 0 || all {
			close(w.done) // a leader's was closed to wake it
		}
	}
}

// refused reports whether err is a max-depth refusal, which stores nothing
// beyond the results returned with it.
func refused(err error) bool {
	var qf *driver.QueueFullError
	return errors.As(err, &qf)
}

// batchContext returns the context of a batch call: the values of its
// leader's, canceled once every caller's context has ended (no one is left
// to hear the outcome). stop releases it.
func batchContext(batch []*wait) (context.Context, func()) {
	base := context.WithoutCancel(batch[0].ctx)
	for _, w := range batch {
		if w.ctx.Done() == nil {
			// This caller's context never ends: neither does the call's.
			return base, func() {}
		}
	}
	ctx, cancel := context.WithCancel(base)
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, w := range batch {
		stops[i] = context.AfterFunc(w.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}
