package worker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestStatusStateNext(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sizeCalls := 0
	size := func() (int64, bool) { sizeCalls++; return 1000, true }
	s := statusState{line: t0}
	steps := []struct {
		after     time.Duration
		done      int64
		want      bool
		wantAttrs string // substring of the line's attributes
		wantSizes int    // size queries so far
	}{
		{10 * time.Second, 100, true, "rate_per_s 10.0 queue_size 1000 eta 1m40s", 1},
		{20 * time.Second, 100, false, "", 1},               // nothing ended: no line
		{30 * time.Second, 300, true, "rate_per_s 10.0", 1}, // size at most once a minute
		{80 * time.Second, 800, true, "queue_size 1000", 2},
		{80*time.Second + idleStatusEvery, 800, true, "rate_per_s 0.0 queue_size 1000", 3}, // idle for 5 minutes: a line
	}
	for _, st := range steps {
		attrs, ok := s.next(t0.Add(st.after), Counts{Done: st.done}, size)
		if ok != st.want {
			t.Fatalf("at %v: line %v, want %v", st.after, ok, st.want)
		}
		if got := strings.Trim(fmt.Sprint(attrs), "[]"); !strings.Contains(got, st.wantAttrs) {
			t.Errorf("at %v: attributes %q, want %q in them", st.after, got, st.wantAttrs)
		}
		if sizeCalls != st.wantSizes {
			t.Errorf("at %v: %d size queries, want %d", st.after, sizeCalls, st.wantSizes)
		}
	}
}
