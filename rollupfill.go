package jobq

import (
	"context"

	"github.com/jobq/jobq/driver"
)

// FillRollups rolls up the result records of the queue's closed
// ten-minute slots that have no rollup yet (driver.RollupFiller), so that
// the next ResultHistory of a whole-hour window (the dashboard's) reads
// the rollups instead of the records. It first checks whether the latest
// closed slot is rolled up (one indexed read) and returns 0 when it is;
// else it returns how many slots (generations of records on SQLite) it
// rolled up. Workers call it when a slot ends (worker.Options
// NoHistoryRollups turns that off); a backend that keeps no rollups
// returns 0.
func (a *Admin) FillRollups(ctx context.Context) (int, error) {
	q := a.q
	const op = "fill result rollups"
	if err := q.checkOpen(op); err != nil {
		return 0, err
	}
	f, ok := q.drv.(driver.RollupFiller)
	if !ok || q.caps.Level(driver.ResultHistory) != driver.Native {
		return 0, nil
	}
	n, err := f.FillRollups(ctx)
	return n, q.wrap(op, err)
}
