package wakeset

import "testing"

func isWoken(w *Waiter) bool {
	select {
	case <-w.ch:
		return true
	default:
		return false
	}
}

func TestSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		waiters int
		run     func(n *Set, ws []*Waiter)
		woken   []bool
		left    int // still waiting afterwards
	}{
		{"one announcement wakes the oldest waiter", 3,
			func(n *Set, ws []*Waiter) { n.Notify(1) },
			[]bool{true, false, false}, 2},
		{"k announcements wake k waiters", 3,
			func(n *Set, ws []*Waiter) { n.Notify(2) },
			[]bool{true, true, false}, 1},
		{"more announcements than waiters wake all", 2,
			func(n *Set, ws []*Waiter) { n.Notify(5) },
			[]bool{true, true}, 0},
		{"negative wakes all", 3,
			func(n *Set, ws []*Waiter) { n.Notify(-1) },
			[]bool{true, true, true}, 0},
		{"a waiter that leaves unwoken wakes nobody", 2,
			func(n *Set, ws []*Waiter) { n.Leave(ws[0]) },
			[]bool{false, false}, 1},
		{"a woken waiter that leaves passes the wake-up on", 3,
			func(n *Set, ws []*Waiter) { n.Notify(1); n.Leave(ws[0]) },
			[]bool{true, true, false}, 1},
		{"a left waiter is not woken later", 2,
			func(n *Set, ws []*Waiter) { n.Leave(ws[0]); n.Notify(1) },
			[]bool{false, true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := &Set{}
			ws := make([]*Waiter, tt.waiters)
			for i := range ws {
				ws[i] = n.Add()
			}
			tt.run(n, ws)
			for i, w := range ws {
				if got := isWoken(w); got != tt.woken[i] {
					t.Errorf("waiter %d woken = %v, want %v", i, got, tt.woken[i])
				}
			}
			if got := n.Waiters(); got != tt.left {
				t.Errorf("%d waiters left, want %d", got, tt.left)
			}
		})
	}
}
