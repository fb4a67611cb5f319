package redis

import (
	"fmt"
	"testing"

	"github.com/jobq/jobq/driver"
)

// TestCompleteArgsPerLease: a completion's arguments go straight into its
// script call's, as pointers to the lease's strings, so a lease costs no
// allocation of its own.
func TestCompleteArgsPerLease(t *testing.T) {
	d := &Driver{prefixArg: "q:"}
	leases := make([]driver.Lease, 1001)
	for i := range leases {
		leases[i] = driver.Lease{MessageID: fmt.Sprintf("m%d", i), Token: fmt.Sprintf("t%d", i)}
	}
	item := func(args []any, i int) []any { return completeArgs(args, &leases[i]) }
	allocs := func(n int) float64 {
		return testing.AllocsPerRun(20, func() {
			if args := d.chunkArgs(0, n, nil, item); len(args) != 2+2*n {
				t.Fatalf("%d arguments for %d leases, want %d", len(args), n, 2+2*n)
			}
		})
	}
	// The call's own slice grows by doubling: about log2(n) allocations.
	if per := (allocs(1001) - allocs(1)) / 1000; per > 0.1 {
		t.Errorf("%.2f allocations per lease, want none (its message ID and token go in as pointers)", per)
	}
}
