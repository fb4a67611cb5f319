package postgres

import (
	"context"
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
//	JOBQ_HISTORY_SCALE=1000000 go test -count=1 -run TestHistoryScale -v ./backends/postgres/
func TestHistoryScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("JOBQ_HISTORY_SCALE"))
	if n <= 0 {
		t.Skip("set JOBQ_HISTORY_SCALE=N to measure the result history over N records")
	}
	d := openDriver(t)
	now := time.Now()
	began := time.Now()
	if err := historytest.Records(n, 5000, now, 7*24*time.Hour, func(recs []*driver.ResultRecord) error {
		return d.PutResults(context.Background(), recs)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.pool.Exec(context.Background(), "ANALYZE "+d.cfg.schema+".results"); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d records in %v", n, time.Since(began).Round(time.Millisecond))
	ctx := context.Background()
	rollups := d.cfg.schema + ".results_rollup"
	historytest.Measure(t, historytest.Scale{
		Agg:  d,
		Fill: func() (int, error) { return d.FillRollups(ctx) },
		Wait: func() { waitFill(d) },
		Forget: func() error {
			_, err := d.pool.Exec(ctx, "DELETE FROM "+rollups+" WHERE queue = $1", d.cfg.queue)
			return err
		},
		ForgetLast: func() error {
			_, err := d.pool.Exec(ctx, "DELETE FROM "+rollups+" WHERE queue = $1 AND slot = (SELECT max(slot) FROM "+rollups+" WHERE queue = $1)", d.cfg.queue)
			return err
		},
	}, now, n)
}
