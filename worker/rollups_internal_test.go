package worker

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestRollupWait: the rollup check after a slot ends comes between the
// fill's grace and the grace plus the jitter after the end, wherever in
// the slot it is drawn.
func TestRollupWait(t *testing.T) {
	start := driver.SlotStart(driver.SlotOf(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)))
	for _, tc := range []struct {
		name string
		at   time.Duration
	}{
		{"at the slot's start", 0},
		{"in the middle", driver.RollupSlot / 2},
		{"just before its end", driver.RollupSlot - time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := start.Add(tc.at)
			end := start.Add(driver.RollupSlot)
			for range 100 {
				at := now.Add(rollupWait(now))
				if lo, hi := end.Add(driver.RollupFillGrace), end.Add(driver.RollupFillGrace+rollupJitter); at.Before(lo) || !at.Before(hi) {
					t.Fatalf("check at %v; want in [%v, %v)", at, lo, hi)
				}
				if driver.SlotOf(at.Add(-driver.RollupFillGrace)) != driver.SlotOf(now)+1 {
					t.Fatalf("check at %v fills up to slot %d; want the slot of %v closed", at, driver.SlotOf(at.Add(-driver.RollupFillGrace)), now)
				}
			}
		})
	}
}
