package historytest

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// admin adds up through the portable layer (Admin.ResultHistory): where
// result-history is emulated, a paged listing that jobq folds.
type admin struct{ a *jobq.Admin }

// AggregateResults implements driver.ResultAggregator.
func (a admin) AggregateResults(ctx context.Context, p driver.HistoryParams) (*driver.History, error) {
	return a.a.ResultHistory(ctx, p)
}

// MeasurePortable stores n records (Records, in batches of batch) through
// d, a driver that keeps records, then measures a 7-day history of them
// through the portable layer (Measure), as the dashboard reads it.
func MeasurePortable(t testing.TB, d driver.Driver, n, batch int) {
	t.Helper()
	store, ok := d.(driver.ResultStore)
	if !ok {
		t.Fatalf("%T keeps no result records", d)
	}
	q, err := jobq.New(d, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("result-history %s", q.Capabilities().Level(driver.ResultHistory))
	now := time.Now()
	began := time.Now()
	if err := Records(n, batch, now, 7*24*time.Hour, func(recs []*driver.ResultRecord) error {
		return store.PutResults(context.Background(), recs)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("stored %d records in %v", n, time.Since(began).Round(time.Millisecond))
	Measure(t, Scale{Agg: admin{q.Admin()}}, now, n)
}
