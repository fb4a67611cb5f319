package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/historytest"
)

// TestRollupMatchesScan: windows served from results_rollup add up to
// what the records add up to, also after a purge, deletes, a late record
// and a replaced one.
func TestRollupMatchesScan(t *testing.T) {
	d := openDriver(t)
	ctx := context.Background()
	historytest.CheckRollup(t, historytest.Rollups{
		Put: func(recs []*driver.ResultRecord) error { return d.PutResults(ctx, recs) },
		Delete: func(ids []string) error {
			_, err := d.DeleteResults(ctx, ids)
			return err
		},
		Purge: func(now time.Time) error {
			_, err := d.PurgeResults(ctx, now)
			return err
		},
		Rolled:  func(p driver.HistoryParams) (*driver.History, error) { return d.AggregateResults(ctx, p) },
		Scanned: func(p driver.HistoryParams) (*driver.History, error) { return d.scanHistory(ctx, p) },
		Kept: func() (n int, err error) {
			err = d.pool.QueryRow(ctx, "SELECT count(*) FROM "+d.cfg.schema+".results_rollup WHERE queue = $1", d.cfg.queue).Scan(&n)
			return n, err
		},
		Fill: func() error {
			waitFill(d)
			_, err := d.FillRollups(ctx)
			return err
		},
	})
}

// waitFill waits for a background fill that a history read started.
func waitFill(d *Driver) {
	for d.rollupFill.Running() {
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRollupFill: after FillRollups (what workers run when a slot ends),
// the dashboard's windows are read from the rollups alone and add up to
// what the records add up to.
func TestRollupFill(t *testing.T) {
	d := openDriver(t)
	ctx := context.Background()
	historytest.CheckFill(t, historytest.Fills{
		Put:         func(recs []*driver.ResultRecord) error { return d.PutResults(ctx, recs) },
		Fill:        func() (int, error) { return d.FillRollups(ctx) },
		Rolled:      func(p driver.HistoryParams) (*driver.History, error) { return d.AggregateResults(ctx, p) },
		Scanned:     func(p driver.HistoryParams) (*driver.History, error) { return d.scanHistory(ctx, p) },
		ReadAddedUp: d.rollupFill.ReadAddedUp.Load,
	})
}
