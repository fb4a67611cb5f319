package redis

import (
	"slices"
	"sync"
)

// notifier hands "n messages became visible" announcements to receivers
// waiting in this process. It wakes at most n waiters, oldest first, so
// one push does not send every idle receiver to Redis at once.
//
// A receiver registers before its claim, so an announcement that arrives
// while the claim runs is not lost. A receiver that was woken but leaves
// without claiming again passes its wake-up on to the next waiter, so a
// wake-up is never swallowed.
type notifier struct {
	mu      sync.Mutex
	waiting []*waiter
}

// waiter is one receiver waiting for an announcement.
type waiter struct {
	ch    chan struct{} // closed when woken
	woken bool
}

func newNotifier() *notifier { return &notifier{} }

// add registers a waiter.
func (n *notifier) add() *waiter {
	w := &waiter{ch: make(chan struct{})}
	n.mu.Lock()
	n.waiting = append(n.waiting, w)
	n.mu.Unlock()
	return w
}

// notify wakes up to k waiters, or all of them when k < 0, and returns how
// many it woke.
func (n *notifier) notify(k int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.wakeLocked(k)
}

func (n *notifier) wakeLocked(k int) int {
	if k < 0 || k > len(n.waiting) {
		k = len(n.waiting)
	}
	for _, w := range n.waiting[:k] {
		w.woken = true
		close(w.ch)
	}
	rest := copy(n.waiting, n.waiting[k:])
	clear(n.waiting[rest:])
	n.waiting = n.waiting[:rest]
	return k
}

// leave unregisters w when its receiver stops without acting on a wake-up
// it may have received; such a wake-up goes to the next waiter. It reports
// whether w had one and no other waiter was left to take it.
func (n *notifier) leave(w *waiter) (dropped bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w.woken {
		return n.wakeLocked(1) == 0
	}
	for i, x := range n.waiting {
		if x == w {
			n.waiting = slices.Delete(n.waiting, i, i+1)
			return false
		}
	}
	return false
}

// waiters returns how many receivers are waiting.
func (n *notifier) waiters() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.waiting)
}
