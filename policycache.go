package jobq

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/driver"
)

// policyRefresh is how often a queue reloads the policies the portable
// layer applies itself (retention, retry-backoff), so that a change made
// elsewhere takes effect within it.
const policyRefresh = time.Minute

// policyLoadTimeout bounds a load for which no caller gave a deadline (a
// background refresh, a caller without one).
const policyLoadTimeout = 5 * time.Second

// policyCache holds the queue policies the portable layer applies itself
// (retention, retry-backoff, results).
// The first use loads them, within the caller's context; later uses get
// the cached values while a stale cache reloads in the background, so
// settlements never wait for it.
type policyCache struct {
	q *Queue

	mu      sync.Mutex
	loaded  time.Time   // zero: never loaded, or invalidated
	gen     uint64      // bumped by invalidate: a load begun before it is stale
	loading *policyLoad // the load under way, which callers share; nil when none
	keep    time.Duration
	backoff Backoff // zero when the queue has no retry-backoff policy
	mode    driver.ResultsMode
	// fresh is the last load's values while they are current: every
	// settlement with a record reads them, and with a worker's handlers
	// settling at once the mutex alone cost about 1.3 µs a task (CPU
	// profile of the Postgres end-to-end benchmark). nil before the first
	// load and after invalidate.
	fresh atomic.Pointer[policySnapshot]
}

// policyLoad is one read of the policies; done is closed when it ends.
type policyLoad struct{ done chan struct{} }

// policySnapshot is one load's values, as policyCache.get returns them.
type policySnapshot struct {
	loaded  time.Time
	keep    time.Duration
	backoff Backoff
	mode    driver.ResultsMode
}

// retention returns the queue's retention.
func (c *policyCache) retention(ctx context.Context) time.Duration {
	keep, _, _ := c.get(ctx)
	return keep
}

// retryBackoff returns the queue's retry-backoff policy; zero when none.
func (c *policyCache) retryBackoff(ctx context.Context) Backoff {
	_, b, _ := c.get(ctx)
	return b
}

// results returns which tasks keep a record (ResultsAll without a policy).
func (c *policyCache) results(ctx context.Context) driver.ResultsMode {
	_, _, m := c.get(ctx)
	return m
}

// get returns the cached values. When there are none yet it waits for a
// load as long as ctx lets it; when ctx ends first it returns the defaults
// (the caller's own I/O then fails with ctx's error) and the load goes on
// for the callers still waiting.
func (c *policyCache) get(ctx context.Context) (time.Duration, Backoff, driver.ResultsMode) {
	if f := c.fresh.Load(); f != nil && time.Since(f.loaded) <= policyRefresh {
		return f.keep, f.backoff, f.mode
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A load can end without values (invalidated meanwhile, or it had the
	// deadline of a caller that passed): whoever still waits starts the next.
	for c.loaded.IsZero() && !ended(ctx) {
		l := c.startLoad(ctx)
		c.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
		}
		c.mu.Lock()
	}
	if !c.loaded.IsZero() && time.Since(c.loaded) > policyRefresh {
		c.startLoad(context.Background())
	}
	if c.mode == 0 { // never loaded: ctx ended first
		// Its deadline may have passed before its timer fired: wait for
		// that, so that the caller's own check of ctx.Err() (a settlement
		// refuses to start) sees the end that made these the defaults.
		c.mu.Unlock()
		<-ctx.Done()
		c.mu.Lock()
		return driver.DefaultRetention, Backoff{}, driver.ResultsAll
	}
	return c.keep, c.backoff, c.mode
}

// ended reports whether ctx is done or its deadline has passed (its timer
// may not have fired yet).
func ended(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}

// startLoad returns the load under way, or starts one; callers hold mu.
// A load takes the deadline of the caller that starts it
// (policyLoadTimeout when it has none), never its cancellation: the
// callers sharing the load wait with their own contexts, and one giving
// up must not fail the others' load.
func (c *policyCache) startLoad(ctx context.Context) *policyLoad {
	if c.loading != nil {
		return c.loading
	}
	l := &policyLoad{done: make(chan struct{})}
	c.loading = l
	deadline, borrowed := ctx.Deadline()
	if !borrowed {
		deadline = time.Now().Add(policyLoadTimeout)
	}
	go c.load(l, deadline, borrowed, c.gen)
	return l
}

// invalidate makes the next use reload the policies (after Admin.SetPolicy
// and Unset on this queue).
func (c *policyCache) invalidate() {
	c.mu.Lock()
	c.loaded = time.Time{}
	c.gen++
	c.fresh.Store(nil)
	c.mu.Unlock()
}

// load reads the policies by deadline and ends l. A failed read keeps the
// values it had (the defaults at first) until the next refresh, except
// when it ran out of a caller's deadline: that says nothing of the engine
// but that the caller was in a hurry, so the next use loads again.
func (c *policyCache) load(l *policyLoad, deadline time.Time, borrowed bool, gen uint64) {
	keep, backoff, mode, ok := driver.DefaultRetention, Backoff{}, driver.ResultsAll, true
	outran := false
	if ps, isStore := c.q.drv.(driver.PolicyStore); isStore && !c.q.closed.Load() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		pols, err := ps.ListPolicies(ctx)
		outran = err != nil && borrowed && ctx.Err() != nil
		cancel()
		if err != nil {
			ok = false
			c.q.log.Debug("jobq: could not read the queue's retention and retry-backoff policies; keeping the last known ones", "error", err)
		}
		for _, p := range pols {
			switch p.Kind {
			case driver.RetentionPolicy:
				keep = p.Period
			case driver.RetryBackoffPolicy:
				backoff.Base, backoff.Cap = p.Backoff()
			case driver.ResultsPolicy:
				mode = driver.ResultsMode(p.Limit)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loading = nil
	close(l.done)
	if outran {
		return
	}
	if ok || c.keep == 0 {
		c.keep, c.backoff, c.mode = keep, backoff, mode
	}
	if c.gen == gen {
		c.loaded = time.Now()
		c.fresh.Store(&policySnapshot{loaded: c.loaded, keep: c.keep, backoff: c.backoff, mode: c.mode})
	}
}
