package postgres

import (
	"maps"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestQuickClaimsStopAtTheCap: since schema step 26 a first pass whose
// keys all have more slots left than it has candidates takes them without
// listing each key's slots. A key capped at 1,000 beside the key under
// test makes the claims count the queue's held rows (bound by the largest
// cap), so the smaller cap is what decides: around the window's size (a
// claim of 10 scans 18 candidates), claims still stop at it, and keys
// with a large cap or none go on being claimed beside it.
func TestQuickClaimsStopAtTheCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cap      int
		uncapped int // tasks of a key without a cap, besides 30 of the key under test and 30 of "wide"
	}{
		{"fewer slots than the window", 12, 0},
		{"as many slots as the window", 18, 0},
		{"a slot more than the window", 19, 0},
		{"more slots than the key has tasks", 40, 0},
		{"beside a key without a cap", 25, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openURL(t, newQueueURL(t))
			setCap(t, d, "k", int64(tt.cap))
			setCap(t, d, "wide", 1000)
			var msgs []*driver.Message
			for i := range 30 {
				msgs = append(msgs, keyedMsg("k", i), keyedMsg("wide", i))
				if i < tt.uncapped {
					msgs = append(msgs, keyedMsg("u", i))
				}
			}
			if _, err := d.Push(ctxT(t), msgs); err != nil {
				t.Fatal(err)
			}
			taken := map[string]int{}
			for range 20 {
				got := receive(t, d, 10, time.Minute)
				if len(got) == 0 {
					break
				}
				for _, r := range got {
					taken[bodyKey(t, r.Body)]++
				}
			}
			want := map[string]int{"k": min(tt.cap, 30), "wide": 30}
			if tt.uncapped > 0 {
				want["u"] = tt.uncapped
			}
			if !maps.Equal(taken, want) {
				t.Fatalf("claimed %v; want %v", taken, want)
			}
			if n := heldRowsOf(t, d, "k"); n != int64(want["k"]) {
				t.Errorf("held rows of k = %d; want one per lease, %d", n, want["k"])
			}
		})
	}
}
