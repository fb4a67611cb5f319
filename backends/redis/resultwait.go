package redis

import (
	"context"
	"strings"
	"sync"
	"time"
)

// recentWindow is how long an announced record that no waiter took is
// remembered, and recentMax how many at most: a caller that read the
// records just before the announcement and registers just after it
// returns at once instead of missing it.
const (
	recentWindow = 2 * time.Second
	recentMax    = 4096
)

// resultWaiters hands the announcements of stored result records
// (P.."results", one task id per line) to the WaitResults calls of this
// process that wait for those ids.
type resultWaiters struct {
	mu      sync.Mutex
	waiting map[*resultWaiter]struct{}
	// recent holds the announced ids no waiter took, oldest first, and
	// recentAt when each was announced.
	recent   []string
	recentAt map[string]time.Time
}

// resultWaiter is one WaitResults call.
type resultWaiter struct {
	ids map[string]bool
	ch  chan struct{} // closed when woken
}

func newResultWaiters() *resultWaiters {
	return &resultWaiters{waiting: map[*resultWaiter]struct{}{}, recentAt: map[string]time.Time{}}
}

// add registers a waiter for ids. It is woken already when one of them
// was announced within recentWindow and not taken; that announcement is
// then used up.
func (r *resultWaiters) add(ids []string) *resultWaiter {
	w := &resultWaiter{ids: make(map[string]bool, len(ids)), ch: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked(time.Now())
	woken := false
	for _, id := range ids {
		w.ids[id] = true
		if _, ok := r.recentAt[id]; ok {
			delete(r.recentAt, id) // its entry in recent goes when pruned
			woken = true
		}
	}
	if woken {
		close(w.ch)
		return w
	}
	r.waiting[w] = struct{}{}
	return w
}

// remove unregisters w.
func (r *resultWaiters) remove(w *resultWaiter) {
	r.mu.Lock()
	delete(r.waiting, w)
	r.mu.Unlock()
}

// announce wakes the waiters of the ids in payload; ids no waiter takes
// are remembered for a while.
func (r *resultWaiters) announce(payload string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked(now)
	for _, id := range strings.Split(payload, "\n") {
		taken := false
		for w := range r.waiting {
			if w.ids[id] {
				close(w.ch)
				delete(r.waiting, w)
				taken = true
			}
		}
		if !taken {
			if _, ok := r.recentAt[id]; !ok {
				r.recent = append(r.recent, id)
			}
			r.recentAt[id] = now
		}
	}
	for len(r.recent) > recentMax {
		delete(r.recentAt, r.recent[0])
		r.recent = r.recent[1:]
	}
}

// wakeAll wakes every waiter: announcements may have been lost (a
// reconnection), or the driver is closing.
func (r *resultWaiters) wakeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.waiting {
		close(w.ch)
	}
	clear(r.waiting)
}

// pruneLocked forgets the announcements older than recentWindow.
func (r *resultWaiters) pruneLocked(now time.Time) {
	i := 0
	for ; i < len(r.recent); i++ {
		id := r.recent[i]
		at, ok := r.recentAt[id]
		if ok && now.Sub(at) < recentWindow {
			break
		}
		if ok {
			delete(r.recentAt, id)
		}
	}
	r.recent = r.recent[i:]
}

// WaitResults implements driver.ResultWaiter: it waits for the
// announcement that a record of one of ids was stored, which every
// settlement with records and every PutResults publishes. The first call
// on a driver subscribes to the announcements and returns at once, since
// a record may have been stored before.
func (d *Driver) WaitResults(ctx context.Context, ids []string, wait time.Duration) error {
	const op = "wait for results"
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if len(ids) == 0 || wait <= 0 {
		return nil
	}
	d.listenMu.Lock()
	first := !d.subscribed[d.resultsChannel()]
	d.listenMu.Unlock()
	if err := d.listen(ctx, d.resultsChannel()); err != nil {
		return err
	}
	if first {
		return nil
	}
	w := d.resultWake.add(ids)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ch:
		return nil
	case <-t.C:
		d.resultWake.remove(w)
		return nil
	case <-ctx.Done():
		d.resultWake.remove(w)
		return d.fail(ctx, op, ctx.Err())
	case <-d.closing.Done():
		d.resultWake.remove(w)
		return d.closing.Err()
	}
}

// count returns how many WaitResults calls are waiting.
func (r *resultWaiters) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.waiting)
}

// remembers reports whether an announcement of id waits for a waiter.
func (r *resultWaiters) remembers(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.recentAt[id]
	return ok
}
