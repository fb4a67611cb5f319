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
