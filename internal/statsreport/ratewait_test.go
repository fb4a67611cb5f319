package statsreport

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestRateWait: the last waiting task starts with the window it falls in,
// counting the claims already in the current one.
func TestRateWait(t *testing.T) {
	t.Parallel()
	p := driver.Policy{Kind: driver.RatePolicy, Key: "lic", Limit: 2, Period: 2 * time.Second}
	tests := []struct {
		admitted, waiting int64
		want              time.Duration
	}{
		{0, 0, 0},
		{0, 1, 0},
		{0, 2, 0},               // both fit the window
		{0, 3, 2 * time.Second}, // the third waits one window
		{0, 6, 4 * time.Second},
		{2, 1, 2 * time.Second}, // the window is full already
		{1, 1, 0},
	}
	for _, tt := range tests {
		if got := RateWait(p, driver.KeyStat{Kind: driver.RatePolicy, Key: "lic", Admitted: tt.admitted, Waiting: tt.waiting}); got != tt.want {
			t.Errorf("RateWait(admitted %d, waiting %d) = %v; want %v", tt.admitted, tt.waiting, got, tt.want)
		}
	}
}
