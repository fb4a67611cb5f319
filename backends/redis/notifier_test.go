package redis

import "testing"

func isWoken(w *waiter) bool {
	select {
	case <-w.ch:
		return true
	default:
		return false
	}
}

func TestNotifier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		waiters int
		run     func(n *notifier, ws []*waiter)
		woken   []bool
		left    int // still waiting afterwards
	}{
		{"one announcement wakes the oldest waiter", 3,
			func(n *notifier, ws []*waiter) { n.notify(1) },
			[]bool{true, false, false}, 2},
		{"k announcements wake k waiters", 3,
			func(n *notifier, ws []*waiter) { n.notify(2) },
			[]bool{true, true, false}, 1},
		{"more announcements than waiters wake all", 2,
			func(n *notifier, ws []*waiter) { n.notify(5) },
			[]bool{true, true}, 0},
		{"negative wakes all", 3,
			func(n *notifier, ws []*waiter) { n.notify(-1) },
			[]bool{true, true, true}, 0},
		{"a waiter that leaves unwoken wakes nobody", 2,
			func(n *notifier, ws []*waiter) { n.leave(ws[0]) },
			[]bool{false, false}, 1},
		{"a woken waiter that leaves passes the wake-up on", 3,
			func(n *notifier, ws []*waiter) { n.notify(1); n.leave(ws[0]) },
			[]bool{true, true, false}, 1},
		{"a left waiter is not woken later", 2,
			func(n *notifier, ws []*waiter) { n.leave(ws[0]); n.notify(1) },
			[]bool{false, true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := newNotifier()
			ws := make([]*waiter, tt.waiters)
			for i := range ws {
				ws[i] = n.add()
			}
			tt.run(n, ws)
			for i, w := range ws {
				if got := isWoken(w); got != tt.woken[i] {
					t.Errorf("waiter %d woken = %v, want %v", i, got, tt.woken[i])
				}
			}
			if got := n.waiters(); got != tt.left {
				t.Errorf("%d waiters left, want %d", got, tt.left)
			}
		})
	}
}
