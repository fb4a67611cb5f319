package postgres

import (
	"sync"
	"time"
)

// notifier rate-limits the wake-up notifications of one queue from one
// process.
//
// The first push after a quiet interval notifies inline, inside its own
// statement, at no extra round trip. A push within the interval after a
// notification sends none; it is covered by the next notification issued
// after it committed: a trailing one, sent on its own an interval after the
// last, or the inline one of a push that comes first. When pushes come faster
// than one per half interval, the trailing notification waits half an
// interval more for such a push: a steady stream of one-at-a-time pushes
// then costs one inline notification per interval and no extra statement
// (at the default 1 ms it had cost one statement per three pushes), and the
// last push of a burst is still announced within one and a half intervals.
//
// The trailing notification waits for a covered push to commit (committed),
// never less: sent earlier, it could reach an idle receiver before the push's
// rows are visible, and that push would then wait for the receiver's next
// poll.
type notifier struct {
	interval time.Duration
	send     func() // sends a trailing notification

	mu       sync.Mutex
	last     time.Time   // when the latest notification was issued
	commit   time.Time   // when the latest push that sent no notification committed
	pending  int         // pushes committed without a notification since last
	deferred bool        // fire waited for a push once since last
	timer    *time.Timer // runs fire; created by the first arm
	armed    bool
}

func newNotifier(interval time.Duration, send func()) *notifier {
	return &notifier{interval: interval, send: send}
}

// inline reports whether the caller should notify as part of its push. The
// caller then reports the outcome: missed if no notification went out,
// committed if it was told not to notify and its push committed.
func (n *notifier) inline() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if now.Sub(n.last) >= n.interval {
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
	n.arm()
}

// missed records that a push told to notify inline sent nothing (it failed,
// or stored no message): the pushes it was to cover still need a
// notification, and the next push may notify inline.
func (n *notifier) missed() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.last = time.Time{}
	if !n.commit.IsZero() {
		n.arm()
	}
}

// uncovered reports whether a push committed after the latest notification
// was issued. A notification is delivered when its own statement commits,
// after it was issued, so it covers every push committed before.
func (n *notifier) uncovered() bool { return n.commit.After(n.last) }

// issued records a notification issued at now. Called with mu held.
func (n *notifier) issued(now time.Time) {
	n.last, n.pending, n.deferred = now, 0, false
}

// arm starts the timer for a trailing notification an interval after the
// latest one, unless it runs already. Called with mu held.
func (n *notifier) arm() {
	if n.armed {
		return
	}
	n.armed = true
	wait := max(0, time.Until(n.last.Add(n.interval)))
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
	since := now.Sub(n.last)
	switch {
	case !n.uncovered():
		n.armed = false
		n.mu.Unlock()
		return
	case since < n.interval:
		// A push notified inline after the timer was set; the pushes
		// committed since need the next notification.
		n.timer.Reset(n.interval - since)
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
	n.issued(now)
	n.mu.Unlock()
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
	if due {
		n.issued(time.Now())
	}
	n.mu.Unlock()
	if due {
		n.send()
	}
}
