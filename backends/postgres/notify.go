package postgres

import (
	"sync"
	"time"
)

// notifyBurst is how many wake-up notifications one queue's pushes from one
// process may send at once, before the rate falls to one per
// notify_interval. Pushes a little less than an interval apart (a producer
// feeding a worker that keeps up) then each notify at once, instead of
// every other one waiting for a trailing notification.
const notifyBurst = 4

// notifier rate-limits the wake-up notifications of one queue from one
// process, with a token bucket: notifyBurst tokens, one more per interval.
//
// A push that finds a token notifies inline, inside its own statement, at no
// extra round trip. A push that finds none sends no notification; it is
// covered by the next notification issued after it committed: the inline
// one of a later push, or a trailing one, sent on its own when the next
// token comes. When pushes come faster than one per half interval, the
// trailing notification waits half an interval more for a push to carry it:
// a steady stream of one-at-a-time pushes then costs one inline
// notification per interval and no extra statement (rather than a
// statement of its own every interval), and the last push of a burst is
// still announced within one and a half intervals.
//
// The trailing notification waits for a covered push to commit (committed),
// never less: sent earlier, it could reach an idle receiver before the push's
// rows are visible, and that push would then wait for the receiver's next
// poll.
type notifier struct {
	interval time.Duration
	send     func() // sends a trailing notification
	// sendN, when set, sends it instead of send, told how many pushes it
	// covers: a wake-up of waiting handles wakes one per push.
	sendN func(pushes int)

	mu       sync.Mutex
	tokens   float64     // notifications that may go out now, up to notifyBurst
	refilled time.Time   // when tokens was last brought up to date
	last     time.Time   // when the latest notification was issued
	commit   time.Time   // when the latest push that sent no notification committed
	pending  int         // pushes committed without a notification since last
	deferred bool        // fire waited for a push once since last
	timer    *time.Timer // runs fire; created by the first arm
	armed    bool
}

func newNotifier(interval time.Duration, send func()) *notifier {
	return &notifier{interval: interval, send: send, tokens: notifyBurst, refilled: time.Now()}
}

// inline reports whether the caller should notify as part of its push. The
// caller then reports the outcome: missed if no notification went out,
// committed if it was told not to notify and its push committed.
func (n *notifier) inline() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if n.refill(now) >= 1 {
		n.tokens--
		n.issued(now)
		return true
	}
	return false
}

// committed records that a push which sent no notification has committed:
// the next notification issued from now on covers it.
func (n *notifier) committed() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.commit = time.Now()
	n.pending++
	n.arm(n.commit)
}

// missed records that a push told to notify inline sent nothing (it failed,
// or stored no message): it gives its token back, and the pushes it was to
// cover still need a notification.
func (n *notifier) missed() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tokens = min(notifyBurst, n.tokens+1)
	n.last = time.Time{}
	if !n.commit.IsZero() {
		n.arm(time.Now())
	}
}

// refill adds the tokens earned since the last refill and returns how many
// there are. Called with mu held.
func (n *notifier) refill(now time.Time) float64 {
	if n.interval <= 0 {
		n.tokens = notifyBurst // no limit
	} else {
		n.tokens = min(notifyBurst, n.tokens+float64(now.Sub(n.refilled))/float64(n.interval))
	}
	n.refilled = now
	return n.tokens
}

// untilToken is how long until a token is there. Called with mu held,
// after refill.
func (n *notifier) untilToken() time.Duration {
	return time.Duration(max(0, 1-n.tokens) * float64(n.interval))
}

// uncovered reports whether a push committed after the latest notification
// was issued. A notification is delivered when its own statement commits,
// after it was issued, so it covers every push committed before.
func (n *notifier) uncovered() bool { return n.commit.After(n.last) }

// issued records a notification issued at now. Called with mu held.
func (n *notifier) issued(now time.Time) {
	n.last, n.pending, n.deferred = now, 0, false
}

// arm starts the timer for a trailing notification when the next token
// comes, unless it runs already. Called with mu held.
func (n *notifier) arm(now time.Time) {
	if n.armed {
		return
	}
	n.armed = true
	n.refill(now)
	wait := n.untilToken()
	if n.timer == nil {
		n.timer = time.AfterFunc(wait, n.fire)
		return
	}
	n.timer.Reset(wait)
}

// fire sends the trailing notification, unless no push needs it, or a push
// may yet carry it inline.
func (n *notifier) fire() {
	n.mu.Lock()
	now := time.Now()
	n.refill(now)
	switch {
	case !n.uncovered():
		n.armed = false
		n.mu.Unlock()
		return
	case n.tokens < 1:
		// A push took the token inline after the timer was set; the
		// pushes committed since need the next notification.
		n.timer.Reset(n.untilToken())
		n.mu.Unlock()
		return
	case n.pending >= 2 && !n.deferred:
		// Pushes come faster than one per half interval: the next one,
		// if it comes, notifies inline and spares a statement.
		n.deferred = true
		n.timer.Reset(n.interval / 2)
		n.mu.Unlock()
		return
	}
	n.armed = false
	n.tokens--
	pushes := n.pending
	n.issued(now)
	n.mu.Unlock()
	n.deliver(pushes)
}

// deliver sends a trailing notification covering pushes pushes.
func (n *notifier) deliver(pushes int) {
	if n.sendN != nil {
		n.sendN(max(pushes, 1))
		return
	}
	n.send()
}

// flush sends a trailing notification now if one is due (used by Close).
func (n *notifier) flush() {
	n.mu.Lock()
	stopped := n.armed && n.timer.Stop() // not stopped: fire runs and decides
	if stopped {
		n.armed = false
	}
	due := stopped && n.uncovered()
	pushes := n.pending
	if due {
		n.issued(time.Now())
	}
	n.mu.Unlock()
	if due {
		n.deliver(pushes)
	}
}
