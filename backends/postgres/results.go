package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
)

// Result records (driver.ResultStore) live in the results table, one row
// per queue and task ID, shared by the schema's queues like messages. The
// primary key serves reads and the insert-if-absent rule of cancel
// requests. The purge finds expired records through results_expiry, a
// BRIN index on expires_at since schema step 18: a summary per range of
// pages instead of a B-tree entry per record, which a settlement does not
// write while its range has no summary (resultpurge.go). Schema step 8
// adds the table to existing databases.
//
// A settlement stores its records in the same statement as the delete
// (completeSQL, deadLetterSQL): a record exists if and only
// if its message was settled, at no extra round trip. Stored records wake
// waiters in other processes with a notification on the schema's channel
// whose payload is resultsPayload, rate-limited like the push wake-ups
// (notify.go): most settlements carry it inline, the rest are covered by a
// trailing one. It goes out only while a process waits for records of the
// queue (schema step 17, awaiting.go).
const resultsMigration = `
CREATE TABLE {{s}}.results (
	queue      text COLLATE "C" NOT NULL,
	task_id    text COLLATE "C" NOT NULL,
	state      text NOT NULL,
	updated_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	data       bytea NOT NULL,
	PRIMARY KEY (queue, task_id)
);
CREATE INDEX results_expiry ON {{s}}.results (queue, expires_at);
`

// resultsNotifyInterval is the least interval between records
// notifications from one queue in one process (notify.go): a settlement
// batch ends about every millisecond under load, and a notification on
// each made every commit queue for the server's notification lock. A
// waiter is told within one and a half intervals.
const resultsNotifyInterval = 10 * time.Millisecond

// resultQueries are the result statements of one schema.
type resultQueries struct {
	list                       string // export.go
	put, get, anyEnded, remove string
	purge                      purgeQueries // resultpurge.go
	// await registers a waiter for records and reads them (WaitResults);
	// notify is the trailing records notification (awaiting.go).
	await, notify string
	// complete and deadLetter by how they store records (insertPlain...).
	// The second index is 1 for the statement that also sends the records
	// notification.
	complete, deadLetter [insertVariants][2]string
}

// insertResults ends a statement that stores records from a relation
// named {{src}} with columns (rid, state, updated, expires, data, ord).
// With {{conflict}} set to upsertConflict, a record replaces the one with
// the same ID, except that a cancel request replaces only an expired
// record (it must never hide an end); and with {{pick}} and {{order}} set
// as in insertVariant, the last record for an ID in the batch wins (an
// upsert cannot touch a row twice). Without them it is a plain insert,
// which fails on an ID that has a record.
const insertResults = `
	INSERT INTO {{s}}.results AS r (queue, task_id, state, updated_at, expires_at, data)
	SELECT {{pick}} {{q}}::text, rid, state, updated, expires, data FROM {{src}} WHERE rid <> '' {{order}}{{conflict}}
	RETURNING 1`

const upsertConflict = `
	ON CONFLICT (queue, task_id) DO UPDATE SET
		state = excluded.state, updated_at = excluded.updated_at, expires_at = excluded.expires_at, data = excluded.data
	WHERE excluded.state <> 'cancel-requested' OR r.expires_at <= now()`

// How a settlement statement stores its records (the index of
// resultQueries.complete and deadLetter). A plain insert costs the server
// about a third less than an upsert (which inserts speculatively and
// confirms), so a settlement tries it first; it fails, and changes
// nothing, when a task has a record already (a cancel request, or an
// earlier run of a task pushed again with the same ID), and is then run
// again as an upsert (see recordsVariant).
const (
	insertPlain    = iota // no task has a record yet
	insertUpsert          // replace records
	insertDistinct        // replace records; a task ID is twice in the batch
	insertVariants
)

func buildResultQueries(schema string) resultQueries {
	r := strings.NewReplacer("{{s}}", schema)
	upsert := func(src, queueParam string, variant int) string {
		pick, order, conflict := "", "", upsertConflict
		switch variant {
		case insertPlain:
			conflict = ""
		case insertDistinct:
			pick, order = "DISTINCT ON (rid)", "ORDER BY rid, ord DESC"
		}
		return strings.NewReplacer("{{src}}", src, "{{q}}", queueParam, "{{pick}}", pick, "{{order}}", order,
			"{{conflict}}", conflict).Replace(insertResults)
	}
	q := resultQueries{
		put: r.Replace(`
WITH x AS (
	SELECT rid, state, ` + usTime("updated_us") + ` AS updated, ` + usTime("expires_us") + ` AS expires, ` + dataOf("span", "$9") + ` AS data, ord
	FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) WITH ORDINALITY
		AS x(rid, state, updated_us, expires_us, span, ord)
), ins AS (` + upsert("x", "$1", insertDistinct) + `
), n AS (
	SELECT pg_notify($7, $8) WHERE EXISTS (SELECT FROM ins) AND {{s}}.results_awaited($1)
)
SELECT count(*) FROM n`),

		list: r.Replace(listResultsSQL),
		get: r.Replace(`
SELECT task_id, state, updated_at, expires_at, data FROM {{s}}.results
WHERE queue = $1 AND task_id = ANY($2::text[]) AND expires_at > now()`),

		await: r.Replace(asyncCTE + `
SELECT {{s}}.await_results($1, $2, $3::text[], $4::float8) FROM async`),

		// A trailing records notification: committed without waiting for
		// the disk (see queries.notify), sent only while a process waits.
		notify: r.Replace(asyncCTE + `
SELECT pg_notify($1, $2) FROM async WHERE {{s}}.results_awaited($3)`),

		anyEnded: r.Replace(`
SELECT EXISTS (SELECT FROM {{s}}.results
	WHERE queue = $1 AND task_id = ANY($2::text[]) AND expires_at > now() AND state <> 'cancel-requested')`),

		purge: buildPurgeQueries(r),

		// Ready and delayed messages, and those whose lease has expired
		// (claimable again; the old holder's settlement finds them gone),
		// are deleted, and the records of the tasks removed and the cancel
		// requests of the tasks in flight stored, in one statement. x holds
		// the cancelled records, then the cancel requests (state
		// cancel-requested); $10 holds the task keys of the IDs in $2. A
		// concurrent claim holds the row: the delete waits for it, then
		// sees the lease and leaves the message. The rows say which IDs
		// were removed (true) and which have a message that stays (false):
		// in flight. h reads the messages as the statement began, so a
		// message that a concurrent claim took meanwhile counts as in
		// flight, not as absent; the upsert's rule (upsertConflict) keeps a
		// cancel request from hiding an end stored meanwhile.
		remove: r.Replace(`
WITH x AS (
	SELECT rid, key, state, ` + usTime("updated_us") + ` AS updated, ` + usTime("expires_us") + ` AS expires, ` + dataOf("span", "$9") + ` AS data, ord
	FROM unnest($2::text[], $10::bytea[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) WITH ORDINALITY
		AS x(rid, key, state, updated_us, expires_us, span, ord)
), d AS (
	DELETE FROM {{s}}.messages
	WHERE queue = $1 AND task_key = ANY($10::bytea[]) AND (lease IS NULL OR visible_at <= now())
	RETURNING task_key, grp
), g AS (` + cancelGroupsSQL + `
), h AS (
	SELECT task_key FROM {{s}}.messages WHERE queue = $1 AND task_key = ANY($10::bytea[])
		AND task_key NOT IN (SELECT task_key FROM d)
), k AS (
	SELECT * FROM x WHERE state <> 'cancel-requested' AND key IN (SELECT task_key FROM d)
	UNION ALL
	SELECT * FROM x WHERE state = 'cancel-requested' AND key IN (SELECT task_key FROM h)
), ins AS (` + upsert("k", "$1", insertDistinct) + `
), n AS (
	SELECT pg_notify($7, $8) WHERE EXISTS (SELECT FROM ins) AND {{s}}.results_awaited($1)
)
SELECT DISTINCT rid, true FROM x WHERE state <> 'cancel-requested' AND key IN (SELECT task_key FROM d) AND (SELECT count(*) FROM n) >= 0
UNION
SELECT rid, false FROM x WHERE key IN (SELECT task_key FROM h)`),
	}
	for v := range insertVariants {
		for notify := range 2 {
			q.complete[v][notify], q.deadLetter[v][notify] = settleWithResultsSQL(r, upsert, v, notify == 1)
		}
	}
	return q
}

// dataOf is the SQL for a record's data: the records of a batch travel as
// one bytea parameter (param) and a span per record (start << 32 | length,
// start 1-based), which costs the client one copy of the bytes; a bytea[]
// parameter cost four, and made the garbage collector a fifth of a
// worker's CPU.
func dataOf(span, param string) string {
	return `substring(` + param + `::bytea from (` + span + ` >> 32)::int for (` + span + ` & 4294967295)::int)`
}

// usTime is the SQL for a time sent as Unix microseconds: bigint arrays
// encode without reflection, timestamptz arrays do not.
func usTime(us string) string {
	return `(timestamptz 'epoch' + ` + us + ` * interval '1 microsecond')`
}

// settleWithResultsSQL builds the settlement statements that store records.
// With notify, the statement also sends the records notification (channel
// and payload are the two parameters after the others), when it stored a
// record and a process waits for records (awaiting.go).
func settleWithResultsSQL(r *strings.Replacer, upsert func(src, queueParam string, variant int) string, variant int, notify bool) (complete, deadLetter string) {
	notifying := func(from, queueParam string, channel int) string {
		if !notify {
			return `
)
SELECT id FROM ` + from
		}
		return fmt.Sprintf(`
), n AS (
	SELECT pg_notify($%d, $%d) WHERE EXISTS (SELECT FROM ins) AND {{s}}.results_awaited(%s)
)
SELECT id FROM %s WHERE (SELECT count(*) FROM n) >= 0`, channel, channel+1, queueParam, from)
	}
	// The records of the messages settled, from the parameters after the
	// settlement's own (first), and the record data's parameter.
	records := func(first int, queueParam string, notifyFirst int) *settleRecords {
		return &settleRecords{
			params: fmt.Sprintf(", $%d::text[], $%d::text[], $%d::bigint[], $%d::bigint[], $%d::bigint[]", first, first+1, first+2, first+3, first+4),
			names:  ", rid, state, updated_us, expires_us, span, ord",
			returning: `, x.rid, x.state, ` + usTime("x.updated_us") + ` AS updated, ` + usTime("x.expires_us") + ` AS expires, ` +
				dataOf("x.span", fmt.Sprintf("$%d", first+5)) + ` AS data, x.ord`,
			tail: func(from string) string {
				return `
), ins AS (` + upsert("d", queueParam, variant) + notifying(from, queueParam, notifyFirst)
			},
		}
	}
	complete = r.Replace(completeSQL(records(5, "$4", 11)))
	deadLetter = r.Replace(deadLetterSQL(records(8, "$6", 14)))
	return complete, deadLetter
}

var (
	_ driver.ResultStore  = (*Driver)(nil)
	_ driver.ResultWaiter = (*Driver)(nil)
	_ driver.TaskRemover  = (*Driver)(nil)
)

// resultsPayload is the notification payload that announces stored
// records of the queue. (A queue whose own name is this string would be
// woken needlessly now and then, which is harmless.)
func (d *Driver) resultsPayload() string { return "results/" + d.cfg.queue }

// recordColumns are records as the statements' parameter arrays; an
// empty rid stands for no record.
type recordColumns struct {
	rids, states     textArray
	updated, expires int8Array // Unix microseconds
	spans            int8Array // of each record's data in blob: see dataOf
	blob             []byte
	any              bool // at least one record
	twice            bool // a task ID has two records
}

// recordArrays turns recs into parameter arrays. A record that is not valid
// gets its error in errs (which must have len(recs)).
func recordArrays(recs []*driver.ResultRecord, errs []error) recordColumns {
	c := recordColumns{
		rids: make(textArray, len(recs)), states: make(textArray, len(recs)),
		updated: make(int8Array, len(recs)), expires: make(int8Array, len(recs)),
		spans: make(int8Array, len(recs)),
	}
	size := 0
	for _, r := range recs {
		if r != nil {
			size += len(r.Data)
		}
	}
	c.blob = make([]byte, 0, size)
	var seen map[string]bool
	for i, r := range recs {
		if r == nil {
			continue
		}
		if err := driver.CheckResultRecord(r); err != nil {
			errs[i] = err
			continue
		}
		if seen == nil {
			seen = make(map[string]bool, len(recs))
		}
		c.any, c.twice = true, c.twice || seen[r.ID]
		seen[r.ID] = true
		c.rids[i], c.states[i] = r.ID, string(r.State)
		c.updated[i], c.expires[i] = r.UpdatedAt.UnixMicro(), r.ExpiresAt.UnixMicro()
		c.spans[i] = int64(len(c.blob)+1)<<32 | int64(len(r.Data))
		c.blob = append(c.blob, r.Data...)
	}
	return c
}

// PutResults implements driver.ResultStore: one statement for the batch,
// which also wakes waiters in other processes.
func (d *Driver) PutResults(ctx context.Context, recs []*driver.ResultRecord) error {
	if err := d.closing.Err(); err != nil {
		return err
	}
	for _, r := range recs {
		if err := driver.CheckResultRecord(r); err != nil {
			return err
		}
	}
	if len(recs) == 0 {
		return nil
	}
	c := recordArrays(recs, make([]error, len(recs)))
	var n int64
	err := d.pool.QueryRow(ctx, d.rsql.put, d.cfg.queue, c.rids, c.states, c.updated, c.expires, c.spans,
		d.channel(), d.resultsPayload(), c.blob).Scan(&n)
	if err != nil {
		return wrap(ctx, "put results", err)
	}
	d.resultWake.fire()
	return nil
}

// GetResults implements driver.ResultStore. Expired records are not
// returned, purged or not.
func (d *Driver) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	out := make([]*driver.ResultRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := d.pool.Query(ctx, d.rsql.get, d.cfg.queue, ids)
	if err != nil {
		return nil, wrap(ctx, "get results", err)
	}
	defer rows.Close()
	found := make(map[string]*driver.ResultRecord, len(ids))
	for rows.Next() {
		var r driver.ResultRecord
		var state string
		var updated, expires pgtype.Timestamptz
		if err := rows.Scan(&r.ID, &state, &updated, &expires, &r.Data); err != nil {
			return nil, wrap(ctx, "get results", err)
		}
		r.State = driver.ResultState(state)
		r.UpdatedAt, r.ExpiresAt = updated.Time, expires.Time
		found[r.ID] = &r
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "get results", err)
	}
	for i, id := range ids {
		out[i] = found[id]
	}
	return out, nil
}

// WaitResults implements driver.ResultWaiter. While the driver's LISTEN
// connection is up, it registers as waiting for records of the queue (for
// up to maxResultsWait; settlements notify only then: awaiting.go), and
// sleeps until a record notification (or a record stored through this
// driver); without one (listen=false, pgbouncer=true, or while it
// reconnects) it returns after the poll interval at most, and the caller
// reads the records again. It returns at once when one of ids has ended
// already, and after resultsBusyWait at most when a settlement in flight
// kept it from registering.
func (d *Driver) WaitResults(ctx context.Context, ids []string, wait time.Duration) error {
	if err := d.closing.Err(); err != nil {
		return err
	}
	if wait <= 0 || len(ids) == 0 {
		return nil
	}
	d.startListener()
	// Take the wake-up before looking, so that a record stored after the
	// look is not missed.
	woken := d.resultWake.wait()
	// The LISTEN connection listens on the schema's channel from the
	// first wait on (before the registration, so that a settlement that
	// sees it is heard); failing that, the wait polls.
	if d.listening.Load() && d.listenResults(ctx) == nil {
		wait = min(wait, maxResultsWait)
		var state int
		// Registered a little longer than the wait, so that a settlement
		// committing as it ends still notifies.
		secs := (wait + time.Second).Seconds()
		if err := d.pool.QueryRow(ctx, d.rsql.await, d.cfg.queue, d.handle, ids, secs).Scan(&state); err != nil {
			return wrap(ctx, "wait for results", err)
		}
		d.resultsWaited.Store(true)
		switch state {
		case 1: // one has ended
			return nil
		case -1: // a settlement in flight: its records are there once it commits
			wait = min(wait, resultsBusyWait)
		}
	} else {
		var ended bool
		if err := d.pool.QueryRow(ctx, d.rsql.anyEnded, d.cfg.queue, ids).Scan(&ended); err != nil {
			return wrap(ctx, "wait for results", err)
		}
		if ended {
			return nil
		}
		wait = min(wait, d.cfg.poll)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-woken:
	case <-timer.C:
	case <-d.closing.Done():
		return d.closing.Err()
	case <-ctx.Done():
		return wrap(ctx, "wait for results", ctx.Err())
	}
	return nil
}

// maxResultsWait bounds one wait for records on a notification, so that a
// waiter's registration (awaiting.go) is renewed before it lapses.
const maxResultsWait = 30 * time.Second

// resultsBusyWait is how long a waiter that a settlement in flight kept
// from registering waits before it reads the records again.
const resultsBusyWait = 5 * time.Millisecond

// resultsOf returns the records of a settlement batch of n messages, or
// nil when none has one (the statement without records then serves).
func resultsOf(n int, rec func(i int) *driver.ResultRecord) []*driver.ResultRecord {
	var recs []*driver.ResultRecord
	for i := range n {
		if r := rec(i); r != nil {
			if recs == nil {
				recs = make([]*driver.ResultRecord, n)
			}
			recs[i] = r
		}
	}
	return recs
}

// runWithRecords runs a settlement that stores the records c, whose
// parameters follow args (the settlement's own), trying the plain insert
// first unless a task ID is twice in the batch or a settlement met a
// record lately (recordsWindow); when the plain insert meets a record,
// the statement changed nothing and runs again as an upsert. The
// statement also sends the records notification when notifications are
// due inline (notify.go).
func (d *Driver) runWithRecords(ctx context.Context, b *settleBatch, stmts *[insertVariants][2]string, c recordColumns, args ...any) []error {
	inline := d.resNotif.inline()
	args = append(args, c.rids, c.states, c.updated, c.expires, c.spans, c.blob)
	n := 0
	if inline {
		n = 1
		args = append(args, d.channel(), d.resultsPayload())
	}
	variant := insertPlain
	switch {
	case c.twice:
		variant = insertDistinct
	case d.recordsMet():
		variant = insertUpsert
	}
	done, err := b.query(ctx, d, stmts[variant][n], args...)
	if variant == insertPlain && isRecordConflict(err) {
		d.recordAt.Store(time.Now().UnixNano())
		done, err = b.query(ctx, d, stmts[insertUpsert][n], args...)
	}
	var errs []error
	if err != nil {
		errs = b.failAll(wrap(ctx, b.op, err))
	} else {
		errs = b.finish(d, done)
	}
	d.settledWithResults(inline, errs)
	return errs
}

// recordsWindow is how long after a settlement met an existing record the
// settlements store records with an upsert at once.
const recordsWindow = time.Minute

// recordsMet reports whether a settlement met an existing record within
// recordsWindow.
func (d *Driver) recordsMet() bool {
	at := d.recordAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < recordsWindow
}

// isRecordConflict reports whether err is the plain insert of a record
// meeting one with the same task ID.
func isRecordConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "results_pkey"
}

// addWithRecord records lease i, whose record recordArrays checked: a
// lease with an invalid record keeps that error and is made to match no
// message, so it is left alone. It returns false for such a lease or a
// malformed one.
func (b *settleBatch) addWithRecord(i int, l driver.Lease) bool {
	recErr := b.errs[i]
	if !b.add(i, l) {
		return false
	}
	if recErr != nil {
		b.errs[i], b.failed = recErr, true
		b.tokens[len(b.tokens)-1] = pgtype.UUID{Valid: true} // the nil UUID matches nothing
		return false
	}
	return true
}

// settledWithResults accounts for the records notification after a
// settlement statement that may have stored records, and wakes this
// process's waiters.
func (d *Driver) settledWithResults(inline bool, errs []error) {
	stored := errs == nil
	for _, e := range errs {
		if e == nil {
			stored = true
			break
		}
	}
	switch {
	case inline && !stored:
		d.resNotif.missed()
	case !inline && stored:
		d.resNotif.committed()
	}
	if stored {
		d.resultWake.fire()
	}
}

// sendResultsNotify sends a trailing records notification on a pooled
// connection.
func (d *Driver) sendResultsNotify() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.pool.Exec(ctx, d.rsql.notify, d.channel(), d.resultsPayload(), d.cfg.queue); err != nil && !d.closing.Closed() {
		d.log.Debug("jobq postgres: records notification failed; waiters will find the records by polling", "err", err)
	}
}

// RemoveTasks implements driver.TaskRemover: one statement deletes the
// messages and stores the records of the tasks it removed and the cancel
// requests of the tasks in flight (and wakes waiters in other processes),
// and reports the tasks in flight.
func (d *Driver) RemoveTasks(ctx context.Context, cancelled, requested []*driver.ResultRecord) (removed, held []string, err error) {
	if err := d.closing.Err(); err != nil {
		return nil, nil, err
	}
	if err := driver.CheckRemoveRecords(cancelled, requested); err != nil {
		return nil, nil, err
	}
	if len(cancelled) == 0 {
		return nil, nil, nil
	}
	recs := append(append(make([]*driver.ResultRecord, 0, len(cancelled)+len(requested)), cancelled...), requested...)
	c := recordArrays(recs, make([]error, len(recs)))
	rows, err := d.pool.Query(ctx, d.rsql.remove, d.cfg.queue, c.rids, c.states, c.updated, c.expires, c.spans,
		d.channel(), d.resultsPayload(), c.blob, taskKeys(c.rids))
	if err != nil {
		return nil, nil, wrap(ctx, "remove tasks", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var gone bool
		if err := rows.Scan(&id, &gone); err != nil {
			return nil, nil, wrap(ctx, "remove tasks", err)
		}
		if gone {
			removed = append(removed, id)
		} else {
			held = append(held, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, wrap(ctx, "remove tasks", err)
	}
	d.deletedRows(int64(len(removed)))
	if len(removed) > 0 {
		d.resultWake.fire()
	}
	return removed, held, nil
}
