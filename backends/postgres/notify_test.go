package postgres

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestNotifierCoalesces(t *testing.T) {
	t.Parallel()
	sent := make(chan struct{}, 100)
	n := newNotifier(time.Hour, func() { sent <- struct{}{} })
	spendBurst(t, n)
	for range 10 {
		if n.inline() {
			t.Fatal("a push within the interval must not notify inline")
		}
		n.committed()
	}
	// The ten pushes share one trailing notification; flush sends it now.
	n.flush()
	if len(sent) != 1 {
		t.Fatalf("trailing notifications sent = %d, want 1", len(sent))
	}
	n.flush()
	if len(sent) != 1 {
		t.Fatalf("a second flush sent another notification")
	}
}

// TestNotifierTrailingWaitsForCommit: the trailing notification is sent only
// after a covered push has committed. Sent before, it reached idle receivers
// before the push's rows were visible, and the push then waited a whole poll
// interval (1 s) to be picked up.
func TestNotifierTrailingWaitsForCommit(t *testing.T) {
	t.Parallel()
	sent := make(chan struct{}, 10)
	n := newNotifier(5*time.Millisecond, func() { sent <- struct{}{} })
	spendBurst(t, n)
	if n.inline() {
		t.Fatal("a push within the interval must not notify inline")
	}
	select {
	case <-sent:
		t.Fatal("a trailing notification was sent before the push it covers committed")
	case <-time.After(30 * time.Millisecond):
	}
	n.committed()
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		t.Fatal("no trailing notification after the push committed")
	}
}

// TestNotifierStreamNotifiesInline: while one-at-a-time pushes keep coming,
// each interval's first push carries the notification and no trailing one
// is sent (it used to be: one extra statement per interval, about one per
// four pushes at the default 1 ms). When the stream stops, one trailing
// notification announces the pushes after the last inline one.
func TestNotifierStreamNotifiesInline(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond // long beside a stall of the test's goroutine
	var trailing atomic.Int32
	sent := make(chan struct{}, 10)
	n := newNotifier(interval, func() {
		trailing.Add(1)
		sent <- struct{}{}
	})
	inline := 0
	for end := time.Now().Add(6 * interval); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if n.inline() {
			inline++
		} else {
			n.committed()
		}
	}
	// The last push: one that finds no token (at most one more finds one).
	for n.inline() {
		inline++
	}
	n.committed()
	if got := trailing.Load(); got != 0 {
		t.Errorf("trailing notifications during the stream = %d, want 0 (the pushes notify inline)", got)
	}
	if inline < notifyBurst+2 {
		t.Errorf("inline notifications = %d over six intervals, want the burst and one per interval", inline)
	}
	select {
	case <-sent:
	case <-time.After(5 * time.Second):
		t.Fatal("no trailing notification after the stream stopped")
	}
	time.Sleep(3 * interval)
	if got := trailing.Load(); got != 1 {
		t.Errorf("trailing notifications = %d, want 1", got)
	}
}

// TestNotifierMissedInline: a push told to notify inline that sends nothing
// (it failed, or stored only duplicates) must not count as covering the
// pushes before it, and frees the next push to notify inline.
func TestNotifierMissedInline(t *testing.T) {
	t.Parallel()
	sent := make(chan struct{}, 10)
	n := newNotifier(time.Hour, func() { sent <- struct{}{} })
	spendBurst(t, n) // the last of these pushes, A, is still running
	if n.inline() {  // push B
		t.Fatal("a push that finds no token must not notify inline")
	}
	n.committed()    // B commits; A has not
	n.missed()       // A fails
	if !n.inline() { // push C, issued after B committed
		t.Fatal("after a missed inline notification the next push must notify inline: A's token is back")
	}
	n.missed() // C stores only duplicates: the statement sent nothing
	n.flush()
	if len(sent) != 1 {
		t.Fatal("push B was never announced: the missed inline notifications counted as covering it")
	}
}

// TestNotifierBurst: after a quiet spell, notifyBurst pushes in a row notify
// inline, so that a producer whose pushes come a little less than an
// interval apart does not make every other one wait for a trailing
// notification; the next push finds no token.
func TestNotifierBurst(t *testing.T) {
	t.Parallel()
	n := newNotifier(time.Hour, func() {})
	spendBurst(t, n)
	if n.inline() {
		t.Fatalf("push %d of a burst notified inline; the bucket holds %d", notifyBurst+1, notifyBurst)
	}
}

// TestNotifierTrailingWaitsForToken: the trailing notification spends a
// token too. When its timer finds none (a push took it inline meanwhile),
// it waits for the next instead of exceeding the rate.
func TestNotifierTrailingWaitsForToken(t *testing.T) {
	t.Parallel()
	sent := make(chan struct{}, 10)
	n := newNotifier(time.Hour, func() { sent <- struct{}{} })
	spendBurst(t, n)
	if n.inline() {
		t.Fatal("a push that finds no token must not notify inline")
	}
	n.committed()
	n.fire() // as if the timer ran now, with no token there
	if len(sent) != 0 {
		t.Fatal("a trailing notification went out without a token")
	}
	n.flush() // Close still announces the push
	if len(sent) != 1 {
		t.Fatalf("flush sent %d notifications, want 1", len(sent))
	}
}

// spendBurst makes the pushes that a quiet notifier lets notify inline, and
// fails unless there are notifyBurst of them.
func spendBurst(t *testing.T, n *notifier) {
	t.Helper()
	for i := range notifyBurst {
		if !n.inline() {
			t.Fatalf("push %d after a quiet spell did not notify inline; want the first %d to", i+1, notifyBurst)
		}
	}
}

// TestNotifierTrailingCoversEveryPush: a trailing wake-up is told how many
// pushes it covers, so that it wakes as many waiting handles as a wake-up
// per push would have.
func TestNotifierTrailingCoversEveryPush(t *testing.T) {
	t.Parallel()
	tests := []struct{ pushes, want int }{{1, 1}, {3, 3}, {10, 10}}
	for _, tt := range tests {
		sent := make(chan int, 10)
		n := newNotifier(time.Hour, func() { sent <- -1 })
		n.sendN = func(pushes int) { sent <- pushes }
		spendBurst(t, n)
		for range tt.pushes {
			if n.inline() {
				t.Fatal("a push within the interval must not notify inline")
			}
			n.committed()
		}
		n.flush()
		if got := <-sent; got != tt.want {
			t.Errorf("%d pushes without a wake-up: the trailing one covers %d; want %d", tt.pushes, got, tt.want)
		}
	}
}
