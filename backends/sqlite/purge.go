package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
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
// A record is written only into its queue's newest generation (or a newer
// one), so a generation below the newest changes only by deletions, which
// raise the lowest expiry of what it holds. Once purged, such a generation
// keeps that lowest expiry in jobq_results_purge, and later purges skip
// it, unread, until it has passed. A generation can become the newest
// again only when every record of the generations above it is deleted;
// the trigger jobq_results_reopened then forgets its bound (and those
// above) in the deleting transaction, whatever deleted them, and counts the
// reopening (in the expiry of the queue's row of gen -2, below what the
// forgetting reaches). A bound is kept only for a generation below the
// newest at the time, and only if no generation was reopened since the
// purge began: one reopened after its scan may have taken records that
// expire before the bound, and then stopped being the newest again. So a
// purge reads the newest generation and those that hold expired records,
// and deletes every expired record when it runs, whatever the retention
// each was written with, never one before it expires.
const resultPurgeTable = `
CREATE TABLE IF NOT EXISTS jobq_results_purge (
	queue  TEXT    NOT NULL,
	gen    INTEGER NOT NULL,
	expiry INTEGER NOT NULL,
	PRIMARY KEY (queue, gen)
) WITHOUT ROWID;
DROP TRIGGER IF EXISTS jobq_results_reopen;
CREATE TRIGGER IF NOT EXISTS jobq_results_reopened AFTER DELETE ON jobq_results
WHEN coalesce((SELECT max(gen) FROM jobq_results WHERE queue = OLD.queue), -1) < OLD.gen
BEGIN
	DELETE FROM jobq_results_purge WHERE queue = OLD.queue
		AND gen >= coalesce((SELECT max(gen) FROM jobq_results WHERE queue = OLD.queue), -1);
	INSERT OR REPLACE INTO jobq_results_purge (queue, gen, expiry) VALUES (OLD.queue, -2,
		coalesce((SELECT expiry FROM jobq_results_purge WHERE queue = OLD.queue AND gen = -2), 0) + 1);
END;
`

// migratePurge is schema 4's step: the expiry index goes (migrate makes
// jobq_results_purge and its trigger at every open, after the key).
func migratePurge(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `DROP INDEX IF EXISTS jobq_results_expiry`)
	return err
}

const (
	// purgeGens lists queue ?1's generations that hold records, oldest
	// first, each with its kept bound (NULL where it has none).
	purgeGens = `WITH RECURSIVE ` + gensOf + `
		SELECT g, (SELECT expiry FROM jobq_results_purge WHERE queue = ?1 AND gen = g) FROM gens WHERE g IS NOT NULL ORDER BY g`
	// purgeScan reads the rowid and expiry of each record of queue ?1 in
	// generation ?2.
	purgeScan = `SELECT rowid, CAST(expires_at AS INTEGER) FROM jobq_results INDEXED BY jobq_results_key WHERE queue = ?1 AND gen = ?2`
	// purgeResultsBatch deletes the records of the JSON list ?3 of rowids
	// that are queue ?1's and have expired at ?2, and the records of the
	// same tasks in older generations, which they hid (so that none comes
	// back).
	purgeResultsBatch = `DELETE FROM jobq_results WHERE rowid IN (
		WITH RECURSIVE ` + gensOf + `,
		expired(rid, gen, k) AS (SELECT r.rowid, r.gen, r.task_id FROM json_each(?3) j CROSS JOIN jobq_results r
			ON r.rowid = j.value WHERE r.queue = ?1 AND r.expires_at <= ?2)
		SELECT rid FROM expired
		UNION ALL
		SELECT r.rowid FROM expired CROSS JOIN gens CROSS JOIN jobq_results r
		WHERE gens.g < expired.gen AND r.queue = ?1 AND r.gen = gens.g AND r.task_id = expired.k)`
	// purgeKeep keeps ?3 as generation ?2's bound, only while it is below
	// the queue's newest.
	purgeKeep = `INSERT INTO jobq_results_purge (queue, gen, expiry)
		SELECT ?1, ?2, ?3 WHERE ?2 < (SELECT max(gen) FROM jobq_results WHERE queue = ?1)
		ON CONFLICT (queue, gen) DO UPDATE SET expiry = excluded.expiry`
	// purgeForget forgets generation ?2's bound.
	purgeForget = `DELETE FROM jobq_results_purge WHERE queue = ?1 AND gen = ?2`
	// purgeReopened reads how often queue ?1's newest generation was
	// emptied (jobq_results_reopened).
	purgeReopened = `SELECT coalesce((SELECT expiry FROM jobq_results_purge WHERE queue = ?1 AND gen = -2), 0)`
)

// purgeBatch is how many records one purge transaction deletes at most,
// so that a large purge holds the file's write lock only briefly at a time
// (a few milliseconds per batch) and other writers get in between.
const purgeBatch = 500

// PurgeResults implements driver.ResultStore: it purges each generation
// that may hold expired records (see above), deleting in transactions of
// at most purgeBatch records, so that a big purge never holds the write
// lock long, and stops early (with what it deleted so far) when ctx ends.
func (d *Driver) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	at := micros(now)
	var reopened int64
	if err := d.db.QueryRowContext(ctx, purgeReopened, d.cfg.queue).Scan(&reopened); err != nil {
		return 0, d.wrap(ctx, "purge results", err)
	}
	gens, err := d.purgeGens(ctx)
	if err != nil {
		return 0, d.wrap(ctx, "purge results", err)
	}
	var total int64
	bounds := map[int64]int64{} // the bounds to keep (0: forget)
	for i, g := range gens {
		if g.bound.Valid && g.bound.Int64 > at && i < len(gens)-1 {
			continue
		}
		n, left, err := d.purgeGen(ctx, g.gen, at)
		total += n
		if err != nil {
			return total, err
		}
		switch {
		case left > 0 && i < len(gens)-1:
			bounds[g.gen] = left
		case g.bound.Valid:
			bounds[g.gen] = 0
		}
	}
	// The bounds are a cache: a failure to keep them costs the next purge
	// a read of the generations, nothing else.
	if len(bounds) > 0 {
		_ = d.keepPurgeBounds(ctx, bounds, reopened)
	}
	return total, nil
}

// purgeGen is one of a queue's generations with its kept bound.
type purgeGen struct {
	gen   int64
	bound sql.NullInt64
}

// purgeGens lists the queue's generations, oldest first, with their
// bounds.
func (d *Driver) purgeGens(ctx context.Context) ([]purgeGen, error) {
	rows, err := d.db.QueryContext(ctx, purgeGens, d.cfg.queue)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []purgeGen
	for rows.Next() {
		var g purgeGen
		if err := rows.Scan(&g.gen, &g.bound); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// purgeGen purges generation g of the queue: it reads its records'
// expiries and deletes those expired at at in batches. It returns how
// many records it deleted and the lowest expiry of those it left (0 when
// it left none).
func (d *Driver) purgeGen(ctx context.Context, g, at int64) (int64, int64, error) {
	var expired []int64
	var left int64
	if err := d.scanGen(ctx, g, func(rid, exp int64) {
		if exp <= at {
			expired = append(expired, rid)
		} else if left == 0 || exp < left {
			left = exp
		}
	}); err != nil {
		return 0, 0, d.wrap(ctx, "purge results", err)
	}
	var total int64
	for len(expired) > 0 {
		batch := expired[:min(purgeBatch, len(expired))]
		expired = expired[len(batch):]
		list, err := json.Marshal(batch)
		if err != nil {
			return total, 0, err
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
			return total, 0, err
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

// keepPurgeBounds keeps the bounds of the generations purged (a bound of
// 0 forgets one); it only forgets when the queue's count of reopenings is
// no longer what it was when the purge began (reopened).
func (d *Driver) keepPurgeBounds(ctx context.Context, bounds map[int64]int64, reopened int64) error {
	return d.writeTx(ctx, "keep purge bounds", func(tx wtx) error {
		var now int64
		if err := tx.QueryRow(purgeReopened, d.cfg.queue).Scan(&now); err != nil {
			return err
		}
		for g, b := range bounds {
			q, args := purgeKeep, []any{d.cfg.queue, g, b}
			switch {
			case b == 0:
				q, args = purgeForget, args[:2]
			case now != reopened:
				continue
			}
			if _, err := tx.Exec(q, args...); err != nil {
				return err
			}
		}
		return nil
	})
}
