package jobq

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// leaseGuard renews the leases of a settlement batch while its result
// records are written to another store (presettle), whenever one comes
// within its margin of running out: without it, a record write slower than
// what is left of a lease (a throttled or loaded storage account) makes the
// settlement that follows fail with LockLost, and the finished task runs
// again. It renews only while the write is under way, so a renewal never
// races the settlement. The drivers it runs for (Results Emulated: azqueue,
// sb, mem) keep a claim's token across renewals or share the claim between
// copies of its lease, so the envelope's own copy of the lease settles as
// well after a renewal; the batch's copies get the renewed leases all the
// same.
type leaseGuard struct {
	q      *Queue
	ctx    context.Context
	leases []*driver.Lease
	vis    []time.Duration
	// due is when to renew each lease next; zero when it is left alone
	// (lost, or without an expiry).
	due []time.Time

	mu      sync.Mutex
	stopped bool
	timer   *time.Timer
	running sync.WaitGroup // a renewal round in flight
}

// leaseMargin is how long before its end a lease with left still to run
// is renewed: time for a renewal on a slow service, and at most half of
// what is left, so that a short lease is not renewed at once.
func leaseMargin(left time.Duration) time.Duration {
	return min(max(2*time.Second, left/4), left/2)
}

// renewAt is when to renew a lease that ends at expiry, seen at now.
func renewAt(expiry, now time.Time) time.Time {
	left := expiry.Sub(now)
	if left <= 0 {
		return now
	}
	return expiry.Add(-leaseMargin(left))
}

// guardLeases starts guarding the n leases lease(i), received with
// visibility vis(i), for a write under ctx, and returns the function that
// ends the guard once the write is over (waiting for a renewal in flight).
// When no lease comes within its margin before ctx's deadline it arms
// nothing; otherwise one timer, and a renewal only when the write is still
// under way when it fires.
func (q *Queue) guardLeases(ctx context.Context, n int, lease func(i int) *driver.Lease, vis func(i int) time.Duration) (stop func()) {
	if q.caps.Level(driver.LeaseRenewal) == driver.Unsupported {
		return func() {}
	}
	now := time.Now()
	var first time.Time
	for i := range n {
		if l := lease(i); !l.Expiry.IsZero() {
			if at := renewAt(l.Expiry, now); first.IsZero() || at.Before(first) {
				first = at
			}
		}
	}
	if first.IsZero() {
		return func() {}
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(first) {
		return func() {}
	}
	g := &leaseGuard{q: q, ctx: ctx, leases: make([]*driver.Lease, n), vis: make([]time.Duration, n), due: make([]time.Time, n)}
	for i := range n {
		g.leases[i], g.vis[i] = lease(i), vis(i)
		if e := g.leases[i].Expiry; !e.IsZero() {
			g.due[i] = renewAt(e, now)
		}
	}
	g.mu.Lock()
	g.timer = time.AfterFunc(first.Sub(now), g.fire)
	g.mu.Unlock()
	return g.stop
}

// stop ends the guard and waits for a renewal round in flight.
func (g *leaseGuard) stop() {
	g.mu.Lock()
	g.stopped = true
	g.timer.Stop()
	g.mu.Unlock()
	g.running.Wait()
}

// fire renews the leases that are due and sets the timer for the next.
func (g *leaseGuard) fire() {
	g.mu.Lock()
	if g.stopped || g.ctx.Err() != nil {
		g.mu.Unlock()
		return
	}
	g.running.Add(1)
	g.mu.Unlock()
	defer g.running.Done()
	next := g.renewDue()
	g.mu.Lock()
	if !g.stopped && !next.IsZero() {
		g.timer.Reset(time.Until(next))
	}
	g.mu.Unlock()
}

// renewDue renews, in parallel, the leases that are due, and returns when
// the next one comes due (zero: none is left to guard).
func (g *leaseGuard) renewDue() time.Time {
	now := time.Now()
	var wg sync.WaitGroup
	for i, l := range g.leases {
		if g.due[i].IsZero() || g.due[i].After(now) {
			continue
		}
		wg.Go(func() {
			nl, err := g.q.drv.Renew(g.ctx, *l, max(g.vis[i], time.Second))
			switch code := errcode.Of(err); {
			case err == nil:
				*l = nl
				g.due[i] = renewAt(nl.Expiry, time.Now())
			case code == errcode.LockLost || code == errcode.Unimplemented || code == errcode.FailedPrecondition:
				// The settlement meets the loss, and reports it.
				g.due[i] = time.Time{}
			default:
				g.q.log.Warn("jobq: renewing a lease while the task's result record is written failed; trying again shortly",
					"message_id", l.MessageID, "error", err)
				g.due[i] = time.Now().Add(200 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	var next time.Time
	for _, at := range g.due {
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}
