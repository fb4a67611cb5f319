package redis

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestSettlingReleasesHeldKeyEntry: every settlement of a lease taken under
// a concurrency cap removes the lease from the key's set of held leases, so
// the set's size is the key's in-flight count and a claim seldom has to
// sweep it. An expired lease's entry stays until a sweep.
func TestSettlingReleasesHeldKeyEntry(t *testing.T) {
	t.Parallel()
	settle := map[string]func(d *Driver, l driver.Lease) []error{
		"complete": func(d *Driver, l driver.Lease) []error {
			return d.Complete(testCtx(t), driver.Completions(l))
		},
		"requeue": func(d *Driver, l driver.Lease) []error {
			return d.Requeue(testCtx(t), []driver.RequeueParams{{Lease: l}})
		},
		"dead-letter": func(d *Driver, l driver.Lease) []error {
			return d.DeadLetter(testCtx(t), []driver.DeadLetterParams{{Lease: l, Reason: "test"}})
		},
	}
	for name, fn := range settle {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := openDriver(t)
			ctx := testCtx(t)
			if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpu", Limit: 10}); err != nil {
				t.Fatal(err)
			}
			m1, m2 := msg("a", 0), msg("b", 0)
			m1.ConcurrencyKey, m2.ConcurrencyKey = "gpu", "gpu"
			push(t, d, m1, m2)
			recs := receive(t, d, 2, time.Minute)
			if len(recs) != 2 {
				t.Fatalf("claimed %d messages; want 2", len(recs))
			}
			set := d.prefix + "cin:gpu"
			if n := d.client.SCard(ctx, set).Val(); n != 2 {
				t.Fatalf("held set has %d entries after claiming 2; want 2", n)
			}
			if errs := fn(d, recs[0].Lease); errs != nil && errs[0] != nil {
				t.Fatalf("%s: %v", name, errs[0])
			}
			members := d.client.SMembers(ctx, set).Val()
			want := recs[1].Lease.MessageID + ":" + recs[1].Lease.Token
			if len(members) != 1 || members[0] != want {
				t.Fatalf("held set after %s = %v; want only the unsettled lease %q", name, members, want)
			}
		})
	}
}

// TestHeldClaimSaysWhenToLookAgain: a claim that passes over messages held
// back by their keys says when to look again: in 100 ms for a key at its
// cap (a settlement anywhere may free it), and when the window frees for
// a key at its rate limit, or in a second if that is later (a policy
// changed meanwhile), so that a short window's claims are taken as they
// free and a long one's are not looked for every 100 ms.
func TestHeldClaimSaysWhenToLookAgain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		policy   driver.Policy
		min, max time.Duration // the next look's delay, as the claim answers it
	}{
		{"cap", driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 1}, 90 * time.Millisecond, 101 * time.Millisecond},
		{"rate window of a minute", driver.Policy{Kind: driver.RatePolicy, Key: "k", Limit: 1, Period: time.Minute}, 900 * time.Millisecond, 1001 * time.Millisecond},
		{"rate window of 30 ms", driver.Policy{Kind: driver.RatePolicy, Key: "k", Limit: 1, Period: 30 * time.Millisecond}, time.Millisecond, 31 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openDriver(t)
			ctx := testCtx(t)
			if err := d.SetPolicy(ctx, tt.policy); err != nil {
				t.Fatal(err)
			}
			m1, m2 := msg("a", 0), msg("b", 0)
			for _, m := range []*driver.Message{m1, m2} {
				if tt.policy.Kind == driver.RatePolicy {
					m.RateLimitKey = "k"
				} else {
					m.ConcurrencyKey = "k"
				}
			}
			push(t, d, m1, m2)
			if got := receive(t, d, 2, time.Minute); len(got) != 1 {
				t.Fatalf("claimed %d messages; want 1 (the key admits one)", len(got))
			}
			recs, next, err := d.claim(ctx, 1, time.Minute.Milliseconds(), false)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 0 {
				// Only a 30 ms window can have freed meanwhile.
				if tt.policy.Period > 100*time.Millisecond {
					t.Fatalf("claimed %d messages while the key is held; want 0", len(recs))
				}
				return
			}
			if next < tt.min || next > tt.max {
				t.Errorf("look again in %v; want %v to %v", next, tt.min, tt.max)
			}
		})
	}
}

// TestHeldClaimLooksForExpiringLeases: a claim held back by a long rate
// window still says to look again when a lease expires (or a delayed
// message comes due) sooner, since nothing announces either.
func TestHeldClaimLooksForExpiringLeases(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.RatePolicy, Key: "k", Limit: 1, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	m1, m2, m3 := msg("a", 0), msg("b", 0), msg("c", 0)
	m1.RateLimitKey, m2.RateLimitKey = "k", "k"
	push(t, d, m1, m2, m3)
	if got := receive(t, d, 3, 300*time.Millisecond); len(got) != 2 {
		t.Fatalf("claimed %d messages; want 2 (the key admits one, and the unkeyed one)", len(got))
	}
	recs, next, err := d.claim(ctx, 1, time.Minute.Milliseconds(), false)
	if err != nil || len(recs) != 0 {
		t.Fatalf("claim while the key is held: %d messages, %v; want none", len(recs), err)
	}
	if next <= 0 || next > 301*time.Millisecond {
		t.Errorf("look again in %v; want when the leases expire, within 300 ms", next)
	}
}
