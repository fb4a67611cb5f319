package azqueue_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jobq/jobq/internal/historytest"
)

// TestHistoryScale measures a 7-day result history (emulated: the blob
// listing, a download per record, added up by jobq) over
// $JOBQ_HISTORY_SCALE synthetic records; it is skipped unless that is
// set. It checks the sums, and logs how long the history took (no timed
// assertion).
//
//	JOBQ_HISTORY_SCALE=10000 go test -count=1 -run TestHistoryScale -v ./backends/azqueue/
func TestHistoryScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("JOBQ_HISTORY_SCALE"))
	if n <= 0 {
		t.Skip("set JOBQ_HISTORY_SCALE=N to measure the result history over N records")
	}
	d, err := openDriver(context.Background(), newQueueURL(t))
	if err != nil {
		t.Fatal(err)
	}
	historytest.MeasurePortable(t, d, n, 500)
}
