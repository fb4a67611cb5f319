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

// policyLoadTimeout bounds one reload.
const policyLoadTimeout = 5 * time.Second

// policyCache holds the queue policies the portable layer applies itself
// (retention, retry-backoff, results).
// The first use loads them; later uses get the cached values while a stale
// cache reloads in the background, so settlements never wait for it.
type policyCache struct {
	q      *Queue
	loadMu sync.Mutex // serializes loads

	mu         sync.Mutex
	loaded     time.Time // zero: never loaded, or invalidated
	gen        uint64    // bumped by invalidate: a load begun before it is stale
	refreshing bool
	keep       time.Duration
	backoff    Backoff // zero when the queue has no retry-backoff policy
	mode       driver.ResultsMode
	// fresh is the last load's values while they are current: every
	// settlement with a record reads them, and with a worker's handlers
	// settling at once the mutex alone cost about 1.3 µs a task (CPU
	// profile of the Postgres end-to-end benchmark). nil before the first
	// load and after invalidate.
	fresh atomic.Pointer[policySnapshot]
}

// policySnapshot is one load's values, as policyCache.get returns them.
type policySnapshot struct {
	loaded  time.Time
	keep    time.Duration
	backoff Backoff
	mode    driver.ResultsMode
}

// retention returns the queue's retention.
func (c *policyCache) retention() time.Duration {
	keep, _, _ := c.get()
	return keep
}

// retryBackoff returns the queue's retry-backoff policy; zero when none.
func (c *policyCache) retryBackoff() Backoff {
	_, b, _ := c.get()
	return b
}

// results returns which tasks keep a record (ResultsAll without a policy).
func (c *policyCache) results() driver.ResultsMode {
	_, _, m := c.get()
	return m
}

func (c *policyCache) get() (time.Duration, Backoff, driver.ResultsMode) {
	if f := c.fresh.Load(); f != nil && time.Since(f.loaded) <= policyRefresh {
		return f.keep, f.backoff, f.mode
	}
	c.mu.Lock()
	if c.loaded.IsZero() {
		c.mu.Unlock()
		c.loadMu.Lock()
		c.mu.Lock()
		fresh := !c.loaded.IsZero()
		c.mu.Unlock()
		if !fresh {
			c.load()
		}
		c.loadMu.Unlock()
		c.mu.Lock()
	} else if time.Since(c.loaded) > policyRefresh && !c.refreshing {
		c.refreshing = true
		go func() {
			c.loadMu.Lock()
			defer c.loadMu.Unlock()
			c.load()
		}()
	}
	defer c.mu.Unlock()
	return c.keep, c.backoff, c.mode
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

// load reads the policies; callers hold loadMu. A failed read keeps the
// values it had (the defaults at first) until the next refresh.
func (c *policyCache) load() {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	keep, backoff, mode, ok := driver.DefaultRetention, Backoff{}, driver.ResultsAll, true
	if ps, isStore := c.q.drv.(driver.PolicyStore); isStore && !c.q.closed.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), policyLoadTimeout)
		pols, err := ps.ListPolicies(ctx)
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
	if ok || c.keep == 0 {
		c.keep, c.backoff, c.mode = keep, backoff, mode
	}
	c.refreshing = false
	if c.gen == gen {
		c.loaded = time.Now()
		c.fresh.Store(&policySnapshot{loaded: c.loaded, keep: c.keep, backoff: c.backoff, mode: c.mode})
	}
}
