package sqlite

import (
	"path/filepath"
	"sync"
)

// notifier wakes this process's waiting receivers of one queue when a write
// in this process may have made a message visible (push, requeue, dead-letter
// requeue), and its result waiters when it stored a result record (results).
// Other processes' writes are found by polling. Drivers opened on the same
// file and queue in one process share a notifier.
type notifier struct {
	key  string
	refs int // guarded by notifiers.mu

	signal         // work may have arrived
	results signal // a result record was stored
}

// signal wakes every goroutine waiting on it at once.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

var notifiers = struct {
	mu sync.Mutex
	m  map[string]*notifier
}{m: map[string]*notifier{}}

func acquireNotifier(path, queue string) *notifier {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	key := path + "\x00" + queue
	notifiers.mu.Lock()
	defer notifiers.mu.Unlock()
	n := notifiers.m[key]
	if n == nil {
		n = &notifier{key: key, signal: signal{ch: make(chan struct{})}, results: signal{ch: make(chan struct{})}}
		notifiers.m[key] = n
	}
	n.refs++
	return n
}

func releaseNotifier(n *notifier) {
	notifiers.mu.Lock()
	defer notifiers.mu.Unlock()
	n.refs--
	if n.refs == 0 {
		delete(notifiers.m, n.key)
	}
}

// wait returns a channel that is closed at the next broadcast. Take it before
// looking for messages, so that a push between the look and the wait is not
// missed.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// broadcast wakes every goroutine waiting now.
func (s *signal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}
