package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/historytest"
)

// TestRollupMatchesScan: windows served from jobq_results_rollup add up to
// what the records add up to, also after a purge, deletes, a late record
// and a replaced one.
func TestRollupMatchesScan(t *testing.T) {
	d := setup(t, "queue=rollup").drv
	ctx := context.Background()
	historytest.CheckRollup(t, historytest.Rollups{
		N:   40000, // three generations of records
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
			err = d.db.QueryRowContext(ctx, "SELECT count(*) FROM jobq_results_rollup WHERE queue = ?", d.cfg.queue).Scan(&n)
			return n, err
		},
	})
}

// TestRollupFill: after FillRollups (what workers run when a slot ends),
// the dashboard's windows are read from the rollups of the closed
// generations (and the newest generation's records) and add up to what
// the records add up to.
func TestRollupFill(t *testing.T) {
	d := setup(t, "queue=rollfill").drv
	ctx := context.Background()
	historytest.CheckFill(t, historytest.Fills{
		N:           40000, // three generations of records
		Put:         func(recs []*driver.ResultRecord) error { return d.PutResults(ctx, recs) },
		Fill:        func() (int, error) { return d.FillRollups(ctx) },
		Rolled:      func(p driver.HistoryParams) (*driver.History, error) { return d.AggregateResults(ctx, p) },
		Scanned:     func(p driver.HistoryParams) (*driver.History, error) { return d.scanHistory(ctx, p) },
		ReadAddedUp: d.rollupFill.ReadAddedUp.Load,
	})
}

// TestRollupReadOnlyOldFile: a file made before the rollup table, opened
// read-only (which makes no table), adds a history window up from its
// records.
func TestRollupReadOnlyOldFile(t *testing.T) {
	b := setup(t, "queue=old")
	now := time.Now()
	if err := historytest.Records(500, 500, now, 24*time.Hour, func(r []*driver.ResultRecord) error { return b.drv.PutResults(b.ctx, r) }); err != nil {
		t.Fatal(err)
	}
	if _, err := b.drv.db.Exec(`DROP TABLE jobq_results_rollup`); err != nil {
		t.Fatal(err)
	}
	_ = b.drv.Close()
	ro, err := New(b.ctx, b.path, Options{Queue: "old", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	until := now.Truncate(time.Hour).Add(time.Hour)
	p := driver.HistoryParams{Since: until.Add(-48 * time.Hour), Until: until, Bucket: time.Hour, Examples: 3, ErrorGroups: 5}
	h, err := ro.AggregateResults(b.ctx, p)
	if err != nil {
		t.Fatalf("history of a read-only file without rollups: %v", err)
	}
	var n int64
	for _, e := range h.Ends {
		n += e.Count
	}
	if n != 500 {
		t.Errorf("history counts %d records; want 500", n)
	}
}
