package worker

import (
	"container/list"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestBacklogBounds: a finished task gives its token back early only while
// the backlog is under its count and its oldest entry is younger than
// settleWindow.
func TestBacklogBounds(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	b := newBacklog(3)
	var first *list.Element
	for i := range 3 {
		e, ok := b.admit(t0.Add(time.Duration(i) * time.Millisecond))
		if !ok {
			t.Fatalf("task %d refused with %d pending of 3", i, i)
		}
		if i == 0 {
			first = e
		}
	}
	if _, ok := b.admit(t0.Add(3 * time.Millisecond)); ok {
		t.Fatal("a fourth task admitted with a limit of 3")
	}
	b.done(first)
	if e, ok := b.admit(t0.Add(4 * time.Millisecond)); !ok {
		t.Fatal("refused after one settled")
	} else {
		b.done(e)
	}
	// The oldest pending (finished at t0+1ms) has waited a whole window:
	// settlement is behind, so no more early tokens, whatever the count.
	if _, ok := b.admit(t0.Add(time.Millisecond + settleWindow)); ok {
		t.Fatalf("admitted while the oldest pending task has waited %v", settleWindow)
	}
}

func TestUnsettledLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		receive int
		want    int
	}{
		{0, maxUnsettled},    // no receive limit: the settler's batch
		{32, 32},             // Azure Storage Queue
		{5000, maxUnsettled}, // larger than the settler's batch
	}
	for _, c := range cases {
		if got := unsettledLimit(driver.Capabilities{MaxReceiveBatch: c.receive}); got != c.want {
			t.Errorf("MaxReceiveBatch %d: limit %d, want %d", c.receive, got, c.want)
		}
	}
}
