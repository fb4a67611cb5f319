package sqlite

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/historytest"
)

// TestHistoryScale measures a 7-day result history over
// $JOBQ_HISTORY_SCALE synthetic records (docs/performance.md), inserted
// in bulk; it is skipped unless that is set. It checks the sums, and
// logs how long the aggregate took (no timed assertion).
//
//	JOBQ_HISTORY_SCALE=1000000 go test -count=1 -run TestHistoryScale -v ./backends/sqlite/
func TestHistoryScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("JOBQ_HISTORY_SCALE"))
	if n <= 0 {
		t.Skip("set JOBQ_HISTORY_SCALE=N to measure the result history over N records")
	}
	b := setup(t, "queue=scale")
	now := time.Now()
	began := time.Now()
	if err := historytest.Records(n, 5000, now, 7*24*time.Hour, func(recs []*driver.ResultRecord) error {
		return b.drv.PutResults(b.ctx, recs)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d records in %v", n, time.Since(began).Round(time.Millisecond))
	d := b.drv
	historytest.Measure(t, historytest.Scale{
		Agg:  d,
		Fill: func() (int, error) { return d.FillRollups(b.ctx) },
		Wait: func() {},
		Forget: func() error {
			_, err := d.db.ExecContext(b.ctx, "DELETE FROM jobq_results_rollup WHERE queue = ?", d.cfg.queue)
			return err
		},
		ForgetLast: func() error {
			_, err := d.db.ExecContext(b.ctx, "DELETE FROM jobq_results_rollup WHERE queue = ?1 AND gen = (SELECT max(gen) FROM jobq_results_rollup WHERE queue = ?1)", d.cfg.queue)
			return err
		},
	}, now, n)
}
