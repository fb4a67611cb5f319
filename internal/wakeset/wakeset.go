// Package wakeset hands wake-ups ("n tasks became claimable") to the
// receivers of one process that wait for work, waking at most n of them,
// oldest first, so that one push does not send every idle receiver of a
// process to the engine at once. The Redis and Postgres drivers share it.
//
// A receiver adds itself before its claim, so a wake-up that arrives while
// the claim runs is not lost. A receiver that was woken but leaves without
// claiming again passes its wake-up on to the next waiter, so a wake-up is
// never swallowed. A broadcast (Notify(-1)) is not passed on: it woke
// every receiver waiting then, and one that came later claims after it.
package wakeset

import (
	"slices"
	"sync"
)

// Set is the receivers of one process waiting for work. The zero value is
// an empty set, ready to use.
type Set struct {
	mu      sync.Mutex
	waiting []*Waiter
}

// Waiter is one receiver waiting for a wake-up.
type Waiter struct {
	ch    chan struct{} // closed when woken
	woken bool
	// counted: woken by Notify(k) for k >= 0, a wake-up meant for one
	// receiver, which Leave passes on; a broadcast has nobody to pass to.
	counted bool
}

// C returns a channel closed when the waiter is woken.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Add registers a waiter.
func (s *Set) Add() *Waiter {
	w := &Waiter{ch: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	s.mu.Unlock()
	return w
}

// Notify wakes up to k waiters, or all of them when k < 0, and returns how
// many it woke.
func (s *Set) Notify(k int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wakeLocked(k)
}

func (s *Set) wakeLocked(k int) int {
	counted := k >= 0
	if k < 0 || k > len(s.waiting) {
		k = len(s.waiting)
	}
	for _, w := range s.waiting[:k] {
		w.woken, w.counted = true, counted
		close(w.ch)
	}
	rest := copy(s.waiting, s.waiting[k:])
	clear(s.waiting[rest:])
	s.waiting = s.waiting[:rest]
	return k
}

// Leave unregisters w when its receiver stops without acting on a wake-up
// it may have received; such a wake-up goes to the next waiter, unless it
// was a broadcast. It reports whether w had one to pass on and no other
// waiter was left to take it.
func (s *Set) Leave(w *Waiter) (dropped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.woken {
		return w.counted && s.wakeLocked(1) == 0
	}
	for i, x := range s.waiting {
		if x == w {
			s.waiting = slices.Delete(s.waiting, i, i+1)
			return false
		}
	}
	return false
}

// Waiters returns how many receivers are waiting.
func (s *Set) Waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}
