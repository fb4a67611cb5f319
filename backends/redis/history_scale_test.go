package redis

import (
	"os"
	"strconv"
	"testing"

	"github.com/jobq/jobq/internal/historytest"
)

// TestHistoryScale measures a 7-day result history (emulated: a paged
// listing jobq adds up) over $JOBQ_HISTORY_SCALE synthetic records; it is
// skipped unless that is set. It checks the sums, and logs how long the
// history took (no timed assertion).
//
//	JOBQ_HISTORY_SCALE=100000 go test -count=1 -run TestHistoryScale -v ./backends/redis/
func TestHistoryScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("JOBQ_HISTORY_SCALE"))
	if n <= 0 {
		t.Skip("set JOBQ_HISTORY_SCALE=N to measure the result history over N records")
	}
	historytest.MeasurePortable(t, openDriver(t), n, 1000)
}
