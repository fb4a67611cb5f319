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

// setOf returns a set with k waiters, oldest first.
func setOf(k int) (*Set, []*Waiter) {
	n := &Set{}
	ws := make([]*Waiter, k)
	for i := range ws {
		ws[i] = n.Add()
	}
	return n, ws
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
		{"a waiter woken by a broadcast that leaves wakes nobody", 2,
			func(n *Set, ws []*Waiter) { n.Notify(-1); n.Add(); n.Leave(ws[0]) },
			[]bool{true, true}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, ws := setOf(tt.waiters)
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

// TestLeaveReportsDropped: Leave reports a wake-up that no waiter of the set
// could take (the driver then passes it to another process), and only a
// counted one: a broadcast woke every waiter there was.
func TestLeaveReportsDropped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		waiters  int
		notify   int  // before the first waiter leaves; 0 for none
		addAfter bool // a waiter comes after the notification
		dropped  bool
	}{
		{"unwoken", 1, 0, false, false},
		{"counted, no other waiter", 1, 1, false, true},
		{"counted, passed to the next waiter", 2, 1, false, false},
		{"counted, passed to a waiter added since", 1, 1, true, false},
		{"broadcast", 1, -1, false, false},
		{"broadcast, a waiter added since", 1, -1, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, ws := setOf(tt.waiters)
			if tt.notify != 0 {
				n.Notify(tt.notify)
			}
			var later *Waiter
			if tt.addAfter {
				later = n.Add()
			}
			if got := n.Leave(ws[0]); got != tt.dropped {
				t.Errorf("Leave reported dropped = %v, want %v", got, tt.dropped)
			}
			if want := tt.notify > 0; later != nil && isWoken(later) != want {
				t.Errorf("the waiter added after the notification woken = %v, want %v", isWoken(later), want)
			}
		})
	}
}
