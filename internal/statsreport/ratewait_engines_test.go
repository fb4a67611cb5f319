package statsreport

import (
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestRateWaitUnknownWhereWaitingIs: a rate key's rate_wait_s is derived
// from its waiting tasks; where the backend cannot count them (waiting
// -1, Redis) the document leaves it out rather than claim no wait (0).
func TestRateWaitUnknownWhereWaitingIs(t *testing.T) {
	t.Parallel()
	for engine, u := range engines.URLs(t, "ratewait") {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			q := engines.Open(t, u)
			pol := driver.Policy{Kind: driver.RatePolicy, Key: "lic", Limit: 1, Period: time.Hour}
			if err := q.Admin().SetPolicy(ctx, pol); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = q.Admin().UnsetPolicy(ctx, driver.RatePolicy, "lic") })
			for _, c := range []string{"echo 1", "echo 2", "echo 3"} {
				if _, err := q.Push(ctx, &jobq.Task{Command: c, RateLimitKey: "lic"}); err != nil {
					t.Fatal(err)
				}
			}
			keys, err := LoadKeys(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, k := range keys.JSON() {
				if k.Kind != string(driver.RatePolicy) || k.Key != "lic" {
					continue
				}
				found = true
				switch {
				case k.Waiting < 0 && k.RateWait != nil:
					t.Errorf("waiting unknown (%d) but rate_wait_s %v; want it left out", k.Waiting, *k.RateWait)
				case k.Waiting >= 0 && (k.RateWait == nil || *k.RateWait != RateWait(pol, driver.KeyStat{Admitted: k.Admitted, Waiting: k.Waiting}).Seconds()):
					t.Errorf("waiting %d: rate_wait_s %v; want the estimate", k.Waiting, k.RateWait)
				}
			}
			if !found {
				t.Fatalf("no rate key lic in %+v", keys.JSON())
			}
		})
	}
}
