package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// expiryMigration is schema step 18: the expiry index becomes a BRIN
// index, a summary (the least and greatest expiry minute: expiryMinute)
// per range of expiryRange pages, in place of a B-tree entry per record.
// Records are stored in about the order they expire, so the ranges'
// summaries are narrow and the purge reads little besides the expired
// records. A settlement writes to the index only when its record's minute
// lies outside its range's summary: once a minute at most for the range
// being filled, and never while the range has no summary yet. (A summary
// of the expiry itself would be widened by every record, each expiring
// later than the one before: in a table that reuses the space of purged
// records, that wrote as much WAL as the B-tree entry.)
//
// A range is summarised by the purge itself (brin_summarize_new_values,
// before it looks) and by VACUUM; one that has no summary is read whole by
// every look, which is why the purge summarises first. A range keeps the
// widest summary it ever had, so after deleting from a range the purge
// drops its summary (brin_desummarize_range), and the next purge
// summarises it again from the records left there: the space a purge frees
// is reused by new records, and a range holding both would otherwise be
// read by every purge. Both functions need the table's owner; under
// another role the purge still finds every expired record, reading more.
const expiryMigration = `
DROP INDEX {{s}}.results_expiry;
CREATE INDEX results_expiry ON {{s}}.results USING brin ((` + expiryMinute + `)) WITH (pages_per_range = 32);
`

// expiryMinute is what results_expiry summarises: a record's expiry
// truncated to the minute (in UTC, so that the expression is immutable).
// A record that expired by t has expiryMinute <= timezone('UTC', t); the
// purge also reads the records that expire later in t's minute.
const expiryMinute = `date_trunc('minute', timezone('UTC', expires_at))`

// expiryRange is results_expiry's pages_per_range: a purge reads at most
// about one range of records that have not expired at each end of those
// that have.
const expiryRange = 32

// purgeBatch is how many records one purge statement deletes at most, so
// that a large purge holds its row locks and writes its WAL in short
// transactions.
const purgeBatch = 1000

// purgeScan is how many expired records one look through the expiry index
// returns at most; the purge deletes them in statements of purgeBatch and
// looks again when it found that many.
const purgeScan = 64 * purgeBatch

// purgeQueries are the purge's statements.
type purgeQueries struct {
	// expired returns the row addresses of up to $3 records of queue $1
	// that expired by $2. It runs where bitmap scans are allowed (the pool
	// turns them off: plans.go), the only scan a BRIN index serves; the
	// queue is compared with IS NOT DISTINCT FROM, which no index serves,
	// so that the plan cannot take the primary key and read every record
	// of the queue instead.
	expired string
	// remove deletes the records at the addresses $3 that are still
	// records of queue $1 that expired by $2 (an address may hold another
	// row by now), leaving those another purge holds. The queue is
	// compared as in expired, so that the addresses are all it reads.
	remove string
	// summarize and desummarize maintain the summaries of the index $1
	// (see expiryMigration); desummarize takes the first page of each
	// range in $2.
	summarize, desummarize string
}

func buildPurgeQueries(r *strings.Replacer) purgeQueries {
	return purgeQueries{
		expired: r.Replace(`
SELECT ctid FROM {{s}}.results
WHERE ` + expiryMinute + ` <= timezone('UTC', $2::timestamptz) AND expires_at <= $2 AND queue IS NOT DISTINCT FROM $1
LIMIT $3`),
		remove: r.Replace(`
DELETE FROM {{s}}.results WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM {{s}}.results WHERE ctid = ANY($3::tid[]) AND queue IS NOT DISTINCT FROM $1 AND expires_at <= $2
	FOR UPDATE SKIP LOCKED))`),
		summarize:   `SELECT brin_summarize_new_values($1::regclass)`,
		desummarize: `SELECT brin_desummarize_range($1::regclass, b) FROM unnest($2::bigint[]) AS b`,
	}
}

// PurgeResults implements driver.ResultStore. It looks for expired records
// through the expiry index and deletes them in statements of at most
// purgeBatch records, each its own transaction, and stops early (with
// what it deleted so far) when ctx ends.
func (d *Driver) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	index := pgx.Identifier{d.cfg.schema, "results_expiry"}.Sanitize()
	d.maintainExpiry(ctx, "summarise", d.rsql.purge.summarize, index)
	var total int64
	for {
		tids, err := d.expiredRecords(ctx, now)
		if err != nil {
			return total, wrap(ctx, "purge results", err)
		}
		n, err := d.removeExpired(ctx, now, tids)
		total += n
		if n > 0 {
			d.maintainExpiry(ctx, "drop the summaries of", d.rsql.purge.desummarize, index, rangesOf(tids))
		}
		if err != nil || len(tids) < purgeScan || n == 0 {
			return total, err
		}
	}
}

// expiredRecords returns the addresses of up to purgeScan records that
// expired by now.
func (d *Driver) expiredRecords(ctx context.Context, now time.Time) ([]pgtype.TID, error) {
	var tids []pgtype.TID
	err := d.withBitmapScans(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, d.rsql.purge.expired, d.cfg.queue, now, purgeScan)
		if err != nil {
			return err
		}
		tids, err = pgx.CollectRows(rows, pgx.RowTo[pgtype.TID])
		return err
	})
	return tids, err
}

// withBitmapScans runs f in a transaction that allows bitmap scans.
func (d *Driver) withBitmapScans(ctx context.Context, f func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_bitmapscan = on`); err != nil {
			return err
		}
		return f(tx)
	})
}

// removeExpired deletes the records at tids that expired by now, in
// statements of at most purgeBatch.
func (d *Driver) removeExpired(ctx context.Context, now time.Time, tids []pgtype.TID) (int64, error) {
	var total int64
	for lo := 0; lo < len(tids); lo += purgeBatch {
		if err := d.closing.Err(); err != nil {
			return total, err
		}
		tag, err := d.pool.Exec(ctx, d.rsql.purge.remove, d.cfg.queue, now, tids[lo:min(lo+purgeBatch, len(tids))])
		if err != nil {
			return total, wrap(ctx, "purge results", err)
		}
		total += tag.RowsAffected()
	}
	return total, nil
}

// rangesOf returns the first page of each expiry index range that holds
// one of tids.
func rangesOf(tids []pgtype.TID) []int64 {
	seen := make(map[int64]bool)
	var out []int64
	for _, t := range tids {
		r := int64(t.BlockNumber) / expiryRange * expiryRange
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// maintainExpiry runs one of the statements that maintain the expiry
// index's summaries (what names it, for the log), waiting a second at
// most for the table's lock (VACUUM holds it). A failure only makes the
// purge read more, so it is logged and the purge goes on.
func (d *Driver) maintainExpiry(ctx context.Context, what, sql string, args ...any) {
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '1s'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	if err != nil && ctx.Err() == nil && !d.closing.Closed() {
		d.log.Debug("jobq postgres: could not "+what+" the result records' expiry ranges; the purge reads more records", "err", err)
	}
}
