package dashboard

import (
	"context"
	"sync"
	"time"
)

// reportCache keeps the last report of each key (a history window, the
// groups' work). A key's first request computes it; later ones get the
// kept one, and once it is older than its lifetime the next request
// starts a recomputation in the background and still gets the kept one
// (so only the first request of a key waits for the engine). A lifetime
// is historyTTL, or ten times what the computation took when that is
// longer, so that a slow one (a large window on a large store) does not
// keep the engine busy.
type reportCache[T any] struct {
	mu      sync.Mutex
	windows map[string]*cachedReport[T]
}

// cachedReport is one key's report.
type cachedReport[T any] struct {
	compute sync.Mutex // held by the computation under way
	mu      sync.Mutex // guards the fields below
	report  *T
	at      time.Time
	ttl     time.Duration
	busy    bool // a background recomputation is under way
}

// historyTimeout bounds a background recomputation.
const historyTimeout = 10 * time.Minute

// get returns the window's report: the kept one, or one computed now with
// compute when there is none yet.
func (c *reportCache[T]) get(ctx context.Context, name string, compute func(ctx context.Context) (*T, error)) (*T, error) {
	c.mu.Lock()
	if c.windows == nil {
		c.windows = map[string]*cachedReport[T]{}
	}
	e := c.windows[name]
	if e == nil {
		e = &cachedReport[T]{}
		c.windows[name] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	if r := e.report; r != nil {
		if time.Since(e.at) >= e.ttl && !e.busy {
			e.busy = true
			go func() {
				bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyTimeout)
				defer cancel()
				_, _ = e.run(bctx, compute)
			}()
		}
		e.mu.Unlock()
		return r, nil
	}
	e.mu.Unlock()
	return e.run(ctx, compute)
}

// run computes the report (once at a time) and keeps it.
func (e *cachedReport[T]) run(ctx context.Context, compute func(ctx context.Context) (*T, error)) (*T, error) {
	e.compute.Lock()
	defer e.compute.Unlock()
	e.mu.Lock()
	if r := e.report; r != nil && !e.busy {
		// Computed by the request this one waited for.
		e.mu.Unlock()
		return r, nil
	}
	e.mu.Unlock()
	began := time.Now()
	r, err := compute(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.busy = false
	if err != nil {
		return nil, err
	}
	e.report, e.at, e.ttl = r, time.Now(), max(historyTTL, 10*time.Since(began))
	return r, nil
}
