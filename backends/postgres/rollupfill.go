package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// fillChunk is how many slots one fill transaction adds up (a day): a
// first fill over a long stretch keeps its progress chunk by chunk.
const fillChunk = int64(24 * time.Hour / driver.RollupSlot)

// fillTimeout bounds a fill that a history read started.
const fillTimeout = 10 * time.Minute

// FillRollups implements driver.RollupFiller: it rolls up the closed
// slots after the latest kept one (at most driver.RollupFillBack back),
// a day of slots per transaction. The check comes first: the latest kept
// slot (one read of the rollup table's key); when it is the latest closed
// slot there is nothing to do. Each transaction first claims the queue's
// fill (an advisory lock): a filler that finds it claimed leaves the work
// to the other. A slot without records gets an empty rollup when it is
// the last of a fill, so that the check holds until the next slot ends.
func (d *Driver) FillRollups(ctx context.Context) (int, error) {
	const op = "fill result rollups"
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	rq := buildRollupQueries(pgx.Identifier{d.cfg.schema}.Sanitize())
	if !d.rollupTable(ctx, rq.table) {
		return 0, nil
	}
	open := driver.SlotOf(time.Now().Add(-driver.RollupFillGrace))
	from, err := d.fillFrom(ctx, d.pool, rq, open)
	if err != nil {
		return 0, wrap(ctx, op, err)
	}
	n := 0
	for from < open {
		to := min(open, from+fillChunk)
		k, claimed, err := d.fillSlots(ctx, rq, from, to)
		n += k
		if err != nil {
			return n, wrap(ctx, op, err)
		}
		if !claimed {
			break
		}
		from = to
	}
	return n, nil
}

// rowQuerier is what fillFrom reads with: the pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// fillFrom is the first slot before open that a fill adds up: the one
// after the latest kept slot, and at most driver.RollupFillBack back.
func (d *Driver) fillFrom(ctx context.Context, q rowQuerier, rq rollupQueries, open int64) (int64, error) {
	var latest *int64
	if err := q.QueryRow(ctx, rq.latest, d.cfg.queue, open).Scan(&latest); err != nil {
		return 0, err
	}
	from := open - int64(driver.RollupFillBack/driver.RollupSlot)
	if latest != nil {
		from = max(from, *latest+1)
	}
	return from, nil
}

// fillSlots rolls up the slots [from, to) in one transaction, when it
// can claim the queue's fill; it reports how many slots held records.
func (d *Driver) fillSlots(ctx context.Context, rq rollupQueries, from, to int64) (n int, claimed bool, err error) {
	err = pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, rq.claim, d.cfg.schema, d.cfg.queue).Scan(&claimed); err != nil || !claimed {
			return err
		}
		// Another filler may have kept some of them meanwhile.
		start, err := d.fillFrom(ctx, tx, rq, to)
		if err != nil || start >= to {
			return err
		}
		from = max(from, start)
		slots := make([]int64, 0, to-from)
		for s := from; s < to; s++ {
			slots = append(slots, s)
		}
		// One pass: the sums and the fingerprints of the same records.
		fresh, prints := map[int64]*driver.Rollup{}, map[int64]fingerprint{}
		if err := addUp(ctx, tx, rq, d.cfg.queue, slots, fresh, prints); err != nil {
			return err
		}
		if _, ok := prints[to-1]; !ok {
			prints[to-1], fresh[to-1] = fingerprint{xmins: "0"}, &driver.Rollup{}
		}
		n = len(prints)
		_, err = tx.Exec(ctx, rq.put, putArgs(d.cfg.queue, fresh, prints, to, nil)...)
		return err
	})
	return n, claimed, err
}

// fillLater starts a fill in the background (one at a time), which Close
// ends and waits for.
func (d *Driver) fillLater() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing.Closed() || d.rollupFill.Running() {
		return
	}
	d.wg.Add(1)
	if !d.rollupFill.Later(d.closing.Done(), func(ctx context.Context) {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(ctx, fillTimeout)
		defer cancel()
		_, _ = d.FillRollups(ctx)
	}) {
		d.wg.Done()
	}
}

var _ driver.RollupFiller = (*Driver)(nil)
