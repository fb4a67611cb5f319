package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jobq/jobq/driver"
)

// Result records (driver.ResultStore) live in jobq_results, one row per
// queue and task ID, shared by the queues of a file like the message
// tables. Times are Unix microseconds. The expiry index serves the purge;
// the primary key serves reads and the insert-if-absent rule of
// cancel-requested records. (WITHOUT ROWID, clustered on the key, was
// slower: records land at random places in it, and its pages hold few.) Files made before records existed gain the
// table when they are opened (migrate).
const resultSchema = `
CREATE TABLE IF NOT EXISTS jobq_results (
	queue      TEXT    NOT NULL,
	task_id    TEXT    NOT NULL,
	state      TEXT    NOT NULL,
	updated_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	PRIMARY KEY (queue, task_id)
);
CREATE INDEX IF NOT EXISTS jobq_results_expiry ON jobq_results (queue, expires_at);
`

const (
	// upsertResult stores a record, replacing the one with the same task
	// ID, except that a cancel-requested record replaces only an expired
	// one (?7 is now): it must never hide an end.
	upsertResult = `INSERT INTO jobq_results (queue, task_id, state, updated_at, expires_at, data)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6)
		ON CONFLICT (queue, task_id) DO UPDATE SET
			state = excluded.state, updated_at = excluded.updated_at,
			expires_at = excluded.expires_at, data = excluded.data
		WHERE excluded.state <> 'cancel-requested' OR jobq_results.expires_at <= ?7`
	selectResults = `SELECT CAST(task_id AS TEXT), CAST(state AS TEXT), CAST(updated_at AS INTEGER), CAST(expires_at AS INTEGER), CAST(data AS BLOB)
		FROM jobq_results
		WHERE queue = ?1 AND task_id IN (SELECT value FROM json_each(?2)) AND expires_at > ?3`
	// anyFinalResult tells a result waiter whether one of the tasks it
	// waits for has ended already.
	anyFinalResult = `SELECT EXISTS (SELECT 1 FROM jobq_results
		WHERE queue = ?1 AND task_id IN (SELECT value FROM json_each(?2)) AND expires_at > ?3 AND state <> 'cancel-requested')`
	// purgeResultsBatch deletes up to ?3 expired records of the queue.
	purgeResultsBatch = `DELETE FROM jobq_results WHERE rowid IN (
		SELECT rowid FROM jobq_results INDEXED BY jobq_results_expiry
		WHERE queue = ?1 AND expires_at <= ?2 LIMIT ?3)`
)

// purgeBatch is how many records one purge transaction deletes at most,
// so that a large purge holds the file's write lock only briefly at a time
// (a few milliseconds per batch) and other writers get in between.
const purgeBatch = 500

var (
	_ driver.ResultStore   = (*Driver)(nil)
	_ driver.ResultWaiter  = (*Driver)(nil)
	_ driver.ResultSettler = (*Driver)(nil)
)

// PutResults implements driver.ResultStore: every record in one
// transaction.
func (d *Driver) PutResults(ctx context.Context, recs []*driver.ResultRecord) error {
	for _, r := range recs {
		if err := driver.CheckResultRecord(r); err != nil {
			return err
		}
	}
	if len(recs) == 0 {
		return d.check(ctx)
	}
	err := d.writeTx(ctx, "put results", func(tx wtx) error {
		now := micros(time.Now())
		for _, r := range recs {
			if err := d.putResult(tx, r, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		d.note.results.broadcast()
	}
	return err
}

// putResult stores one checked record in tx.
func (d *Driver) putResult(tx wtx, r *driver.ResultRecord, now int64) error {
	_, err := tx.Exec(upsertResult, d.cfg.queue, r.ID, string(r.State), micros(r.UpdatedAt), micros(r.ExpiresAt), nonNil(r.Data), now)
	return err
}

// GetResults implements driver.ResultStore. Expired records are not
// returned, purged or not.
func (d *Driver) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	out := make([]*driver.ResultRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "sqlite get results: task IDs: %w", err)
	}
	rows, err := d.db.QueryContext(ctx, selectResults, d.cfg.queue, string(list), micros(time.Now()))
	if err != nil {
		return nil, d.wrap(ctx, "get results", err)
	}
	defer rows.Close()
	found := make(map[string]*driver.ResultRecord, len(ids))
	for rows.Next() {
		var (
			r              driver.ResultRecord
			state          string
			updated, expir int64
		)
		if err := rows.Scan(&r.ID, &state, &updated, &expir, &r.Data); err != nil {
			return nil, d.wrap(ctx, "get results", err)
		}
		r.State = driver.ResultState(state)
		r.UpdatedAt, r.ExpiresAt = fromMicros(updated), fromMicros(expir)
		found[r.ID] = &r
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap(ctx, "get results", err)
	}
	for i, id := range ids {
		out[i] = found[id]
	}
	return out, nil
}

// PurgeResults implements driver.ResultStore. It deletes in transactions
// of at most purgeBatch records, so that a big purge never holds the
// write lock long, and stops early (with what it deleted so far) when ctx
// ends.
func (d *Driver) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := d.writeTx(ctx, "purge results", func(tx wtx) error {
			res, err := tx.Exec(purgeResultsBatch, d.cfg.queue, micros(now), purgeBatch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}

// WaitResults implements driver.ResultWaiter. Records stored through this
// process wake it at once; those stored by other processes are noticed by
// polling the file's data_version every poll interval (a pragma, no lock).
// It returns at once when one of ids has ended already.
func (d *Driver) WaitResults(ctx context.Context, ids []string, wait time.Duration) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	if wait <= 0 || len(ids) == 0 {
		return nil
	}
	deadline := time.Now().Add(wait)
	// Take the wake-up and the file's version before looking, so that a
	// record stored after the look is not missed.
	wake := d.note.results.wait()
	v0, err := d.idle.dataVersion(ctx)
	if err != nil {
		return d.wrap(ctx, "wait for results", err)
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return driver.Errorf(driver.InvalidArgument, "sqlite wait for results: task IDs: %w", err)
	}
	var ended bool
	if err := d.db.QueryRowContext(ctx, anyFinalResult, d.cfg.queue, string(list), micros(time.Now())).Scan(&ended); err != nil {
		return d.wrap(ctx, "wait for results", err)
	}
	if ended {
		return nil
	}
	timer := time.NewTimer(min(d.cfg.poll, wait))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctxErr(ctx.Err())
		case <-d.closed:
			return errClosed
		case <-wake:
			return nil
		case <-timer.C:
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		v, err := d.idle.dataVersion(ctx)
		if err != nil {
			return d.wrap(ctx, "wait for results", err)
		}
		if v != v0 {
			return nil // another connection committed: perhaps a record
		}
		timer.Reset(min(d.cfg.poll, left))
	}
}

// dataVersion returns the file's PRAGMA data_version on the idle
// connection, which changes whenever another connection commits.
func (w *idleWatch) dataVersion(ctx context.Context) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var v int64
	err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	return v, err
}

// CompleteWithResults implements driver.ResultSettler: each message is
// deleted and its record stored in the same transaction, the record only
// when the lease was held.
func (d *Driver) CompleteWithResults(ctx context.Context, leases []driver.Lease, recs []*driver.ResultRecord) []error {
	if len(recs) != len(leases) {
		return sameErr(len(leases), driver.Errorf(driver.InvalidArgument,
			"sqlite complete: %d result records for %d leases", len(recs), len(leases)))
	}
	return d.complete(ctx, leases, recs)
}

// DeadLetterWithResults implements driver.ResultSettler: each message is
// moved to the dead letters and its record stored in the same transaction,
// the record only when the lease was held.
func (d *Driver) DeadLetterWithResults(ctx context.Context, reqs []driver.DeadLetterParams, recs []*driver.ResultRecord) []error {
	if len(recs) != len(reqs) {
		return sameErr(len(reqs), driver.Errorf(driver.InvalidArgument,
			"sqlite dead-letter: %d result records for %d messages", len(recs), len(reqs)))
	}
	return d.deadLetter(ctx, reqs, recs)
}

// recordAt returns recs[i], or nil when recs is nil, and whether it is
// valid to store.
func recordAt(recs []*driver.ResultRecord, i int) (*driver.ResultRecord, error) {
	if recs == nil || recs[i] == nil {
		return nil, nil
	}
	return recs[i], driver.CheckResultRecord(recs[i])
}

// sameErr returns err for each of n items.
func sameErr(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
