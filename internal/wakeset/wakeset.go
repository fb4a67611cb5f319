// Package wakeset hands wake-ups ("n tasks became claimable") to the
// receivers of one process that wait for work, waking at most n of them,
// oldest first, so that one push does not send every idle receiver of a
// process to the engine at once. The Redis and Postgres drivers share it.
//
// A receiver adds itself before its claim, so a wake-up that arrives while
// the claim runs is not lost. A receiver that was woken but leaves without
// claiming again passes its wake-up on to the next waiter, so a wake-up is
// never swallowed.
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
	if k < 0 || k > len(s.waiting) {
		k = len(s.waiting)
	}
	for _, w := range s.waiting[:k] {
		w.woken = true
		close(w.ch)
	}
	rest := copy(s.waiting, s.waiting[k:])
	clear(s.waiting[rest:])
	s.waiting = s.waiting[:rest]
	return k
}

// Leave unregisters w when its receiver stops without acting on a wake-up
// it may have received; such a wake-up goes to the next waiter. It reports
// whether w had one and no other waiter was left to take it.
func (s *Set) Leave(w *Waiter) (dropped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.woken {
		return s.wakeLocked(1) == 0
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
