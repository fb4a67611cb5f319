package servicebus

import (
	"sync"
	"time"
)

// brokerClock estimates how far Service Bus's clock is ahead of this
// machine's, so that a lock's expiry (stamped by the broker) becomes a
// local time for the heartbeat, and a scheduled copy's enqueue time (read
// by the broker) is the delay the caller asked for.
//
// A lock taken or renewed at broker time LockedUntil-lock was taken before
// the reply reached us, so LockedUntil-lock-now is a lower bound of the
// offset; the estimate is the largest bound seen within the last two
// windows (a stale bound, after this machine's clock was stepped, ages
// out). Without the queue's lock duration (no admin rights) nothing can be
// estimated and broker times are used as they are.
type brokerClock struct {
	lock time.Duration // the queue's lock duration; 0 when unknown

	mu       sync.Mutex
	known    bool
	cur      time.Duration // largest bound in the current window
	prev     time.Duration // largest bound in the window before
	curStart time.Time
}

// skewWindow is how long one window of offset observations lasts.
const skewWindow = 5 * time.Minute

// observe notes a lock that the broker set to expire at lockedUntil and
// whose reply arrived at now.
func (c *brokerClock) observe(lockedUntil *time.Time, now time.Time) {
	if c.lock <= 0 || lockedUntil == nil {
		return
	}
	bound := lockedUntil.Add(-c.lock).Sub(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.known:
		c.known, c.cur, c.prev, c.curStart = true, bound, bound, now
	case now.Sub(c.curStart) > skewWindow:
		c.prev, c.cur, c.curStart = c.cur, bound, now
	case bound > c.cur:
		c.cur = bound
	}
}

// offset returns the estimated broker time minus local time.
func (c *brokerClock) offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return 0
	}
	return max(c.cur, c.prev)
}

// local converts a broker time to this machine's clock.
func (c *brokerClock) local(t time.Time) time.Time { return t.Add(-c.offset()) }

// broker converts a local time to the broker's clock.
func (c *brokerClock) broker(t time.Time) time.Time { return t.Add(c.offset()) }
