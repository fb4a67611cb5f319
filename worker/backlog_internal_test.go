package worker

import (
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
	var entries [5]settling
	for i := range 3 {
		if !b.admit(&entries[i], t0.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("task %d refused with %d pending of 3", i, i)
		}
	}
	if b.admit(&entries[3], t0.Add(3*time.Millisecond)) {
		t.Fatal("a fourth task admitted with a limit of 3")
	}
	b.done(&entries[0])
	if !b.admit(&entries[4], t0.Add(4*time.Millisecond)) {
		t.Fatal("refused after one settled")
	}
	b.done(&entries[4])
	// The oldest pending (finished at t0+1ms) has waited a whole window:
	// settlement is behind, so no more early tokens, whatever the count.
	if b.admit(&entries[3], t0.Add(time.Millisecond+settleWindow)) {
		t.Fatalf("admitted while the oldest pending task has waited %v", settleWindow)
	}
	// Settled out of order, the rest leave the backlog empty: the next
	// task is admitted whenever it finishes.
	b.done(&entries[2])
	b.done(&entries[1])
	if b.n != 0 || b.oldest != nil || b.newest != nil {
		t.Fatalf("backlog after every task settled: %d pending, oldest %p, newest %p", b.n, b.oldest, b.newest)
	}
	if !b.admit(&entries[3], t0.Add(time.Hour)) {
		t.Fatal("refused with an empty backlog")
	}
}

// TestBacklogAdmitAllocatesNothing: a task's place in the backlog is its
// own (taskRun.settling), so admitting and settling it allocate nothing.
func TestBacklogAdmitAllocatesNothing(t *testing.T) {
	b := newBacklog(3)
	var s settling
	now := time.Unix(1000, 0)
	if n := testing.AllocsPerRun(100, func() {
		if !b.admit(&s, now) {
			t.Fatal("refused with an empty backlog")
		}
		b.done(&s)
	}); n != 0 {
		t.Errorf("admitting and settling a task took %v allocations, want 0", n)
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
