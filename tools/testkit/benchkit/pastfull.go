package benchkit

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// PastFullKeyClaims is how many claims a ClaimPastFullKey sub-benchmark can
// make: run it with -benchtime PastFullKeyClaims x or less.
const PastFullKeyClaims = 500

// maxEmptyClaims is how many claims in a row may find nothing before
// ClaimPastFullKey fails: 100,000 tasks at 1,024 a claim, and some.
const maxEmptyClaims = 150

// PolicyDriver is a driver that enforces policies: what ClaimPastFullKey
// needs.
type PolicyDriver interface {
	driver.Driver
	driver.PolicyStore
}

// ClaimPastFullKey runs, as sub-benchmarks "head=N", one receive of up to
// 32 and the completion of what it took, on a queue whose head holds N
// tasks (1,000, 10,000, 100,000) of a key at its cap of 1, ahead of the
// tasks the receives take (of ten keys without a cap). An op is a claim;
// the CPU figures are per task taken, and tasks/claim is how many a claim
// took on average (below 32 where claims step through the head, as on
// Redis). open returns a fresh, empty queue.
func ClaimPastFullKey(b *testing.B, open func(b *testing.B) PolicyDriver) {
	for _, head := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("head=%d", head), func(b *testing.B) {
			d := open(b)
			ctx := b.Context()
			if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "full", Limit: 1}); err != nil {
				b.Fatal(err)
			}
			push := func(key string, n int) {
				for done := 0; done < n; done += 1000 {
					msgs := make([]*driver.Message, min(1000, n-done))
					for i := range msgs {
						msgs[i] = &driver.Message{Body: fmt.Appendf(nil, `{"key": %q, "n": %d}`, key, done+i), ConcurrencyKey: key}
						if key != "full" {
							msgs[i].ConcurrencyKey = fmt.Sprintf("k%d", (done+i)%10)
						}
					}
					if _, err := d.Push(ctx, msgs); err != nil {
						b.Fatal(err)
					}
				}
			}
			push("full", 1)
			if got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Hour}); err != nil || len(got) != 1 {
				b.Fatalf("the first task of the full key: %d received, %v", len(got), err)
			}
			push("full", head)
			push("other", 32*PastFullKeyClaims)
			taken, empty := 0, 0
			cm := MarkCPU()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if i == PastFullKeyClaims {
					b.Fatalf("more than %d claims: run with -benchtime %dx or less", PastFullKeyClaims, PastFullKeyClaims)
				}
				got, err := d.Receive(ctx, driver.ReceiveParams{Max: 32, Visibility: time.Minute})
				if err != nil {
					b.Fatalf("claim %d: %v", i, err)
				}
				taken += len(got)
				if len(got) == 0 {
					// Redis steps through the head, 1,024 messages a claim.
					if empty++; empty > maxEmptyClaims {
						b.Fatalf("%d claims in a row found nothing", empty)
					}
					continue
				}
				empty = 0
				params := make([]driver.CompleteParams, len(got))
				for j, r := range got {
					params[j].Lease = r.Lease
				}
				for _, err := range d.Complete(ctx, params) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			cm.Report(b, max(taken, 1))
			b.ReportMetric(float64(taken)/float64(b.N), "tasks/claim")
		})
	}
}
