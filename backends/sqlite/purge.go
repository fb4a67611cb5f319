package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"time"
)

// The purge of expired records (driver.ResultStore.PurgeResults). Records
// have no expiry index (schema 4): a completion's commit would write its
// page, a WAL frame per settlement commit. The purge walks the queue's
// generations (results.go) through the key instead, oldest first, reading
// each one's records on a read connection (no write lock) and deleting
// the expired ones in write transactions of at most purgeBatch, each
// checking the expiry again, so no record is ever deleted before it
// expires.
//
// A generation other than the newest receives no records any more, so
// once purged it keeps in jobq_results_purge the lowest expiry of the
// records it has left, with its fingerprint (how many records and the sum
// of their rowids, read from the key alone, as the rollups' are): a later
// purge skips it, unread, until that expiry has passed, unless the
// fingerprint changed (a record deleted, or one written after every newer
// generation was deleted). So a purge reads the newest generation and the
// generations that hold expired records, and purges every expired record
// whatever the retention each was written with. The one way a record can
// be purged late (never early): every record of the generations above a
// bound one is deleted, so that it is the newest again, and a record of it
// is then replaced in place (same rowid, so the same fingerprint) with an
// earlier expiry than the bound; it goes when the bound passes.
const resultPurgeTable = `
CREATE TABLE IF NOT EXISTS jobq_results_purge (
	queue   TEXT    NOT NULL,
	gen     INTEGER NOT NULL,
	expiry  INTEGER NOT NULL,
	records INTEGER NOT NULL,
	rowids  INTEGER NOT NULL,
	PRIMARY KEY (queue, gen)
) WITHOUT ROWID;
`

// migratePurge is schema 4's step: the expiry index goes (the table
// jobq_results_purge is made with the others).
func migratePurge(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `DROP INDEX IF EXISTS jobq_results_expiry`)
	return err
}

const (
	// purgeBounds reads the kept expiry bounds of queue ?1's generations.
	purgeBounds = `SELECT gen, expiry, records, rowids FROM jobq_results_purge WHERE queue = ?1`
	// purgeScan reads the rowid and expiry of each record of queue ?1 in
	// generation ?2.
	purgeScan = `SELECT rowid, CAST(expires_at AS INTEGER) FROM jobq_results INDEXED BY jobq_results_key WHERE queue = ?1 AND gen = ?2`
	// purgeResultsBatch deletes the records of the JSON list ?3 of rowids
	// that are queue ?1's and have expired at ?2, and the records of the
	// same tasks in older generations, which they hid (so that none comes
	// back).
	purgeResultsBatch = `DELETE FROM jobq_results WHERE rowid IN (
		WITH RECURSIVE ` + gensOf + `,
		expired(rid, gen, k) AS (SELECT rowid, gen, task_id FROM jobq_results
			WHERE rowid IN (SELECT value FROM json_each(?3)) AND queue = ?1 AND expires_at <= ?2)
		SELECT rid FROM expired
		UNION ALL
		SELECT r.rowid FROM expired CROSS JOIN gens CROSS JOIN jobq_results r
		WHERE gens.g < expired.gen AND r.queue = ?1 AND r.gen = gens.g AND r.task_id = expired.k)`
	// purgeKeep keeps generation ?2's expiry bound.
	purgeKeep = `INSERT INTO jobq_results_purge (queue, gen, expiry, records, rowids) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (queue, gen) DO UPDATE SET expiry = excluded.expiry, records = excluded.records, rowids = excluded.rowids`
	// purgeForget forgets the bounds of queue ?1 whose generation is not
	// in the JSON list ?2 of those that hold records.
	purgeForget = `DELETE FROM jobq_results_purge WHERE queue = ?1 AND gen NOT IN (SELECT value FROM json_each(?2))`
)

// purgeBatch is how many records one purge transaction deletes at most,
// so that a large purge holds the file's write lock only briefly at a time
// (a few milliseconds per batch) and other writers get in between.
const purgeBatch = 500

// purgeBound is a closed generation's kept bound: no record of it expires
// before expiry while its fingerprint is print.
type purgeBound struct {
	expiry int64
	print  fingerprint
}

// PurgeResults implements driver.ResultStore: it purges each generation
// that may hold expired records (see above), deleting in transactions of
// at most purgeBatch records, so that a big purge never holds the write
// lock long, and stops early (with what it deleted so far) when ctx ends.
func (d *Driver) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	at := micros(now)
	prints, newest, bounds, err := d.purgeState(ctx)
	if err != nil {
		return 0, d.wrap(ctx, "purge results", err)
	}
	var total int64
	gens := make([]int64, 0, len(prints))
	for g := range prints {
		gens = append(gens, g)
	}
	slices.Sort(gens)
	keep := map[int64]purgeBound{}
	live := gens[:0:0] // the generations that still hold records
	for _, g := range gens {
		if b, ok := bounds[g]; ok && g < newest && b.print == prints[g] && b.expiry > at {
			live = append(live, g)
			continue
		}
		n, left, err := d.purgeGen(ctx, g, at)
		total += n
		if err != nil {
			return total, err
		}
		if left.print.records > 0 {
			live = append(live, g)
			if g < newest {
				keep[g] = left
			}
		}
	}
	// The bounds are a cache: a failure to keep them costs the next purge
	// a read of the generations, nothing else.
	forget := false
	for g := range bounds {
		forget = forget || !slices.Contains(live, g)
	}
	if len(keep) > 0 || forget {
		_ = d.keepPurgeBounds(ctx, keep, live)
	}
	return total, nil
}

// purgeState reads, in one read transaction, the fingerprint of each of
// the queue's generations, the newest, and the kept bounds.
func (d *Driver) purgeState(ctx context.Context) (map[int64]fingerprint, int64, map[int64]purgeBound, error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, nil, err
	}
	defer func() { _ = tx.Rollback() }()
	prints, newest, err := d.rollupPrints(ctx, tx)
	if err != nil {
		return nil, 0, nil, err
	}
	bounds := map[int64]purgeBound{}
	err = historyRows(ctx, tx, purgeBounds, []any{d.cfg.queue}, func(rows *sql.Rows) error {
		var g int64
		var b purgeBound
		if err := rows.Scan(&g, &b.expiry, &b.print.records, &b.print.rowids); err != nil {
			return err
		}
		bounds[g] = b
		return nil
	})
	return prints, newest, bounds, err
}

// purgeGen purges generation g of the queue: it reads its records'
// expiries and deletes those expired at at in batches. It returns how
// many records it deleted and the bound of those it left.
func (d *Driver) purgeGen(ctx context.Context, g, at int64) (int64, purgeBound, error) {
	var expired []int64
	left := purgeBound{expiry: 1<<63 - 1}
	if err := d.scanGen(ctx, g, func(rid, exp int64) {
		if exp <= at {
			expired = append(expired, rid)
			return
		}
		left.expiry = min(left.expiry, exp)
		left.print.records++
		left.print.rowids += rid
	}); err != nil {
		return 0, left, d.wrap(ctx, "purge results", err)
	}
	var total int64
	for len(expired) > 0 {
		batch := expired[:min(purgeBatch, len(expired))]
		expired = expired[len(batch):]
		list, err := json.Marshal(batch)
		if err != nil {
			return total, left, err
		}
		var n int64
		err = d.writeTx(ctx, "purge results", func(tx wtx) error {
			res, err := tx.Exec(purgeResultsBatch, d.cfg.queue, at, string(list))
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += n
		if err != nil {
			return total, left, err
		}
	}
	return total, left, nil
}

// scanGen calls f with the rowid and expiry of each of the queue's
// records in generation g, read on a read connection.
func (d *Driver) scanGen(ctx context.Context, g int64, f func(rid, exp int64)) error {
	rows, err := d.db.QueryContext(ctx, purgeScan, d.cfg.queue, g)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var rid, exp int64
		if err := rows.Scan(&rid, &exp); err != nil {
			return err
		}
		f(rid, exp)
	}
	return rows.Err()
}

// keepPurgeBounds keeps the bounds of the generations purged, and forgets
// those of generations not among live (those that hold records).
func (d *Driver) keepPurgeBounds(ctx context.Context, keep map[int64]purgeBound, live []int64) error {
	list, err := json.Marshal(live)
	if err != nil {
		return err
	}
	return d.writeTx(ctx, "keep purge bounds", func(tx wtx) error {
		for g, b := range keep {
			if _, err := tx.Exec(purgeKeep, d.cfg.queue, g, b.expiry, b.print.records, b.print.rowids); err != nil {
				return err
			}
		}
		_, err := tx.Exec(purgeForget, d.cfg.queue, string(list))
		return err
	})
}
