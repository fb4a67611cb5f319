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
	if !n.inline() {
		t.Fatal("first push after a quiet interval must notify inline")
	}
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
	if !n.inline() {
		t.Fatal("first push after a quiet interval must notify inline")
	}
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
// three pushes at the default 1 ms). When the stream stops, one trailing
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
	// The last push: within the interval after the latest inline one.
	if n.inline() {
		t.Fatal("a push within the interval must not notify inline")
	}
	n.committed()
	if got := trailing.Load(); got != 0 {
		t.Errorf("trailing notifications during the stream = %d, want 0 (the pushes notify inline)", got)
	}
	if inline < 2 {
		t.Errorf("inline notifications = %d over six intervals, want one per interval", inline)
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
	if !n.inline() { // push A
		t.Fatal("first push after a quiet interval must notify inline")
	}
	if n.inline() { // push B
		t.Fatal("a push within the interval must not notify inline")
	}
	n.committed()    // B commits; A has not
	n.missed()       // A fails
	if !n.inline() { // push C, issued after B committed
		t.Fatal("after a missed inline notification the next push must notify inline")
	}
	n.missed() // C stores only duplicates: the statement sent nothing
	n.flush()
	if len(sent) != 1 {
		t.Fatal("push B was never announced: the missed inline notifications counted as covering it")
	}
}
