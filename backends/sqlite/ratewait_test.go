package sqlite

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestHeldClaimSaysWhenTheRateWindowFrees: a claim that leases nothing
// because a rate key is at its limit says when the key admits again (its
// oldest admission's expiry), so that a waiting receiver looks then rather
// than up to a poll later; a key at its concurrency cap gives no such time
// (a settlement frees it).
func TestHeldClaimSaysWhenTheRateWindowFrees(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		policy   driver.Policy
		min, max time.Duration // from the first claim; 0, 0: no time
	}{
		{"rate window of a minute", driver.Policy{Kind: driver.RatePolicy, Key: "k", Limit: 1, Period: time.Minute}, 59 * time.Second, time.Minute + time.Second},
		{"cap", driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 1}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "")
			if err := b.drv.SetPolicy(b.ctx, tt.policy); err != nil {
				t.Fatal(err)
			}
			m1, m2 := msg("a"), msg("b")
			for _, m := range []*driver.Message{m1, m2} {
				if tt.policy.Kind == driver.RatePolicy {
					m.RateLimitKey = "k"
				} else {
					m.ConcurrencyKey = "k"
				}
			}
			b.push(t, m1, m2)
			first := time.Now()
			if got := b.receive(t, 2, time.Minute); len(got) != 1 {
				t.Fatalf("claimed %d messages; want 1 (the key admits one)", len(got))
			}
			got, retryAt, err := b.drv.claim(b.ctx, 1, time.Minute)
			if err != nil || len(got) != 0 {
				t.Fatalf("claim while the key is held: %d messages, %v; want none", len(got), err)
			}
			if tt.max == 0 {
				if retryAt != 0 {
					t.Errorf("retryAt %v after the first claim; want none", fromMicros(retryAt).Sub(first))
				}
				return
			}
			if in := fromMicros(retryAt).Sub(first); in < tt.min || in > tt.max {
				t.Errorf("retryAt %v after the first claim; want %v to %v", in, tt.min, tt.max)
			}
		})
	}
}
