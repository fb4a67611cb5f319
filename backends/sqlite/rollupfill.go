package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/jobq/jobq/driver"
)

// rollupLatestClosed is the queue's latest closed generation (the one
// before its newest), and whether it has a rollup: two seeks of the key
// and one of the rollup table's.
const rollupLatestClosed = `SELECT g, EXISTS (SELECT 1 FROM jobq_results_rollup WHERE queue = ?1 AND gen = g) FROM (
	SELECT max(gen) AS g FROM jobq_results WHERE queue = ?1 AND gen < (SELECT max(gen) FROM jobq_results WHERE queue = ?1))`

// FillRollups implements driver.RollupFiller: it rolls up the closed
// generations that have no rollup or a stale one. The check comes first:
// whether the latest closed generation has a rollup (a few seeks of the
// keys); when it has, there is nothing to do. A generation closes after
// about 16,000 records of the file, so most checks find nothing to do.
// Concurrent fills write the same rows (upserts).
func (d *Driver) FillRollups(ctx context.Context) (int, error) {
	const op = "fill result rollups"
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	if !d.hasRollups(ctx) {
		return 0, nil
	}
	var latest sql.NullInt64
	var kept bool
	if err := d.db.QueryRowContext(ctx, rollupLatestClosed, d.cfg.queue).Scan(&latest, &kept); err != nil {
		return 0, d.wrap(ctx, op, err)
	}
	if !latest.Valid || kept {
		return 0, nil
	}
	fresh := map[int64]*driver.Rollup{}
	var prints map[int64]fingerprint
	var newest int64
	err := func() error {
		tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if prints, newest, err = d.rollupPrints(ctx, tx); err != nil {
			return err
		}
		var gone bool
		stale, err := d.readKept(ctx, tx, 0, 0, prints, newest, &driver.Rollup{}, &gone)
		if err != nil {
			return err
		}
		stale = slices.DeleteFunc(stale, func(g int64) bool { return g == newest })
		if len(stale) == 0 {
			return nil
		}
		return d.rollupRows(ctx, tx, stale, fresh)
	}()
	if err != nil {
		return 0, d.wrap(ctx, op, err)
	}
	if len(fresh) > 0 {
		d.keepRollups(ctx, fresh, prints, newest)
	}
	return len(fresh), nil
}

var _ driver.RollupFiller = (*Driver)(nil)
