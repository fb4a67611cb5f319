package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Result records (driver.ResultStore) live in jobq_results, shared by the
// queues of a file like the message tables. Times are Unix microseconds;
// task_id is stored as the messages' is (taskKey: a canonical ID as its
// 16 bytes).
//
// Records are grouped in generations: a record written gets the table's
// highest rowid shifted right by genShift, or its queue's highest gen if
// that is more (currentGen), so a new record always has the highest
// generation of its queue, and the records written together share one.
// The key (queue, gen, task_id) therefore receives its inserts in a small
// region (the current generation's, about 1<<genShift records) instead of
// at random places among every record kept: with a million records, a
// completion no longer dirties a random page of a large index (a drain ran
// at 0.6-0.7 times its speed with few records; it runs at the same speed
// now).
//
// A record replaces the one with the same task ID in its generation; one
// in an older generation is left in place and hidden: a task's record is
// the one of its highest generation, and only while it has not expired.
// Reads look a task ID up in each generation of the queue (about 61 per
// million records; gensOf walks them through the key). The purge deletes
// the hidden records of a task with its record, so that none comes back.
//
// A completion's commit writes two pages for its record: the table's last
// (records are appended) and the current generation's page of the key.
// There is no expiry index, which would be a third (purge.go).
const resultTable = `
CREATE TABLE IF NOT EXISTS jobq_results (
	queue      TEXT    NOT NULL,
	gen        INTEGER NOT NULL,
	task_id    TEXT    NOT NULL,
	state      TEXT    NOT NULL,
	updated_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	data       BLOB    NOT NULL
);
`

// resultIndex is jobq_results' key, made after the table (and after
// migrateResults has filled it, which is faster than filling it as it
// goes). It is the table's only index: the purge finds expired records
// through it, a generation at a time (purge.go).
const resultIndex = `
CREATE UNIQUE INDEX IF NOT EXISTS jobq_results_key ON jobq_results (queue, gen, task_id);
`

// genShift sets how many records a generation holds: about 1<<genShift.
// Each completion dirties a random page of the current generation's part
// of the key, so that part must stay in the page cache (DefaultCacheSize:
// about 1,000 pages of newPageSize). 16,384 records take about 300 pages;
// 65,536 (1,200 pages) no longer fit, and a drain missed the cache once its
// generation was half full, writing and reading more per task. Reading a
// task's record costs a lookup per generation, so smaller generations make
// it somewhat slower.
const genShift = 14

// gensOf is a recursive common table expression, gens(g): the
// generations of queue ?1 that hold records, highest first, each found by
// one seek in the key (the last row's g is NULL).
const gensOf = `gens(g) AS (
	SELECT max(gen) FROM jobq_results WHERE queue = ?1
	UNION ALL
	SELECT (SELECT max(gen) FROM jobq_results WHERE queue = ?1 AND gen < gens.g) FROM gens WHERE gens.g IS NOT NULL)`

var (
	// currentGen is the generation a record written now gets: never
	// below the queue's highest, since a VACUUM may renumber the rowids
	// and a record written below its task's newest would stay hidden. Its
	// one parameter, the queue, is a bare ? (see upsertResults).
	currentGen = `SELECT max((SELECT coalesce(max(rowid), 0) FROM jobq_results) >> ` + strconv.Itoa(genShift) + `,
		(SELECT coalesce(max(gen), 0) FROM jobq_results WHERE queue = ?))`
	// upsertResult stores a record in generation ?2 (currentGen),
	// replacing the one with the same task ID there.
	upsertResult = `INSERT INTO jobq_results (queue, gen, task_id, state, updated_at, expires_at, data)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
		ON CONFLICT (queue, gen, task_id) DO UPDATE SET
			state = excluded.state, updated_at = excluded.updated_at,
			expires_at = excluded.expires_at, data = excluded.data`
	// selectResults returns every record of the task IDs in the JSON list
	// ?2, hidden ones too, with the ID as asked and the generation.
	selectResults = `WITH RECURSIVE ` + gensOf + `,
		ids(id, k) AS (SELECT value, CASE WHEN ` + canonicalSQL("value") + ` THEN unhex(value) ELSE value END FROM json_each(?2))
		SELECT ids.id, r.gen, CAST(r.state AS TEXT), CAST(r.updated_at AS INTEGER), CAST(r.expires_at AS INTEGER), CAST(r.data AS BLOB)
		FROM ids CROSS JOIN gens CROSS JOIN jobq_results r
		WHERE r.queue = ?1 AND r.gen = gens.g AND r.task_id = ids.k`
)

// copyResults is schema 3's step: the records of an older file moved into
// the layout of resultTable (the old table renamed out of the way first),
// all in generation 0. The old key made the text task IDs unique, and
// converting them keeps them so; a row of another type (another tool's)
// is copied only where its key is free.
var copyResults = `
DROP INDEX IF EXISTS jobq_results_expiry;
ALTER TABLE jobq_results RENAME TO jobq_results_v2;
` + resultTable + `
INSERT INTO jobq_results (queue, gen, task_id, state, updated_at, expires_at, data)
	SELECT queue, 0, ` + keyColumnSQL + `, state, updated_at, expires_at, data
	FROM jobq_results_v2 WHERE typeof(task_id) = 'text';
` + resultIndex + `
INSERT OR IGNORE INTO jobq_results (queue, gen, task_id, state, updated_at, expires_at, data)
	SELECT queue, 0, ` + keyColumnSQL + `, state, updated_at, expires_at, data
	FROM jobq_results_v2 WHERE typeof(task_id) <> 'text';
DROP TABLE jobq_results_v2;
`

// migrateResults moves the records of a file made before schema 3 into
// generations (copyResults); a file that has them already is left alone.
// It runs inside migrate's transaction.
func migrateResults(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('jobq_results') WHERE name = 'gen'`).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, copyResults)
	return err
}

var (
	_ driver.ResultStore  = (*Driver)(nil)
	_ driver.ResultWaiter = (*Driver)(nil)
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
		return d.closing.Check(ctx)
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

// putResult stores one checked record in tx. A cancel request is stored
// only where the task has no record, or an expired one: it must never hide
// an end.
func (d *Driver) putResult(tx wtx, r *driver.ResultRecord, now int64) error {
	if r.State == driver.ResultCancelRequested {
		found, err := d.newestResults(func(q string, args ...any) (*sql.Rows, error) { return tx.Query(q, args...) }, []string{r.ID}, now)
		if err != nil {
			return err
		}
		if found[r.ID] != nil {
			return nil
		}
	}
	gen, err := tx.recordGen(d.cfg.queue)
	if err != nil {
		return err
	}
	_, err = tx.Exec(upsertResult, d.cfg.queue, gen, taskKey(r.ID), string(r.State), micros(r.UpdatedAt), micros(r.ExpiresAt), nonNil(r.Data))
	return err
}

// recordGen is the generation of the records queue writes in this
// transaction: currentGen, read once per transaction (two lookups less per
// record). The records of one transaction share it, as they would have
// anyway but for the rare one that crossed a generation's boundary. It
// stays right for the whole transaction: nothing else writes meanwhile,
// and a rolled-back savepoint only lowers the queue's highest generation.
func (t wtx) recordGen(queue string) (int64, error) {
	if g, ok := t.w.gens[queue]; ok {
		return g, nil
	}
	var g int64
	if err := t.QueryRow(currentGen, queue).Scan(&g); err != nil {
		return 0, err
	}
	if t.w.gens == nil {
		t.w.gens = map[string]int64{}
	}
	t.w.gens[queue] = g
	return g, nil
}

// GetResults implements driver.ResultStore. Expired records are not
// returned, purged or not.
func (d *Driver) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	out := make([]*driver.ResultRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	found, err := d.currentResults(ctx, ids)
	if err != nil {
		return nil, d.wrap(ctx, "get results", err)
	}
	for i, id := range ids {
		out[i] = found[id]
	}
	return out, nil
}

// currentResults is newestResults read from the file now.
func (d *Driver) currentResults(ctx context.Context, ids []string) (map[string]*driver.ResultRecord, error) {
	return d.newestResults(func(q string, args ...any) (*sql.Rows, error) { return d.db.QueryContext(ctx, q, args...) }, ids, micros(time.Now()))
}

// newestResults returns the record of each of ids that has one that has
// not expired at now (Unix microseconds): the one of its highest
// generation. query runs a query.
func (d *Driver) newestResults(query func(string, ...any) (*sql.Rows, error), ids []string, now int64) (map[string]*driver.ResultRecord, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "sqlite: task IDs: %w", err)
	}
	rows, err := query(selectResults, d.cfg.queue, string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type found struct {
		gen     int64
		expires int64
		rec     *driver.ResultRecord
	}
	newest := make(map[string]found, len(ids))
	for rows.Next() {
		var (
			r              driver.ResultRecord
			state          string
			gen            int64
			updated, expir int64
		)
		if err := rows.Scan(&r.ID, &gen, &state, &updated, &expir, &r.Data); err != nil {
			return nil, err
		}
		if f, ok := newest[r.ID]; ok && f.gen >= gen {
			continue
		}
		r.State = driver.ResultState(state)
		r.UpdatedAt, r.ExpiresAt = fromMicros(updated), fromMicros(expir)
		newest[r.ID] = found{gen: gen, expires: expir, rec: &r}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make(map[string]*driver.ResultRecord, len(newest))
	for id, f := range newest {
		if f.expires > now {
			out[id] = f.rec
		}
	}
	return out, nil
}

// WaitResults implements driver.ResultWaiter. Records stored through this
// process wake it at once; those stored by other processes are noticed by
// polling the file's data_version every poll interval (a pragma, no lock).
// It returns at once when one of ids has ended already.
func (d *Driver) WaitResults(ctx context.Context, ids []string, wait time.Duration) error {
	if err := d.closing.Check(ctx); err != nil {
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
	found, err := d.currentResults(ctx, ids)
	if err != nil {
		return d.wrap(ctx, "wait for results", err)
	}
	ended := false
	for _, r := range found {
		ended = ended || r.State != driver.ResultCancelRequested
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
		case <-d.closing.Done():
			return d.closing.Err()
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
