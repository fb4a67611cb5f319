package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bodypack"
)

// querier is what push needs from a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Push implements driver.Driver: one multi-row INSERT for the whole batch.
// The batch is atomic (all stored or none), which the contract allows.
func (d *Driver) Push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	// The policies first: a read of them takes a connection of the pool,
	// which a one-task push must not hold already (a pool of one would
	// wait for itself).
	_, maxDepth, err := d.currentPolicies(ctx)
	if err != nil {
		// A read: the insert was not sent.
		werr := wrap(ctx, "push", err)
		return nil, &driver.Error{Code: errcode.Of(werr), Err: werr, Applied: driver.NotApplied}
	}
	var db pushDB = d.pool
	if len(msgs) == 1 {
		// One task at a time: the producer waits on each commit (spin.go).
		conn, release, err := d.polling(ctx)
		if err != nil {
			// No connection, so nothing was sent.
			werr := wrap(ctx, "push", err)
			return nil, &driver.Error{Code: errcode.Of(werr), Err: werr, Applied: driver.NotApplied}
		}
		defer release()
		db = conn
	}
	inline := d.notif.inline()
	res, err := d.pushBounded(ctx, db, msgs, pushWake{inline: inline, self: d.handle}, maxDepth)
	switch {
	case !inline && err == nil:
		d.notif.committed()
	case inline && (err != nil || stored(res) == 0):
		d.notif.missed() // the statement notifies only when it stores a message
	}
	if err != nil {
		werr := wrap(ctx, "push", err)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Severity == "ERROR" {
			// The server answered with an error: the push's one
			// transaction was rolled back, whatever the code.
			return nil, &driver.Error{Code: errcode.Of(werr), Err: werr, Applied: driver.NotApplied}
		}
		// The push may have committed, and its wake-up passed this
		// process's handle over: the receivers here look.
		d.wake.Notify(-1)
		return nil, werr
	}
	// The receivers in this process: the statement's wake-up passed their
	// handle over.
	d.wake.Notify(-1)
	d.checkStats()
	return res, nil
}

// stored counts the messages a push stored (those not duplicates).
func stored(res []driver.PushResult) int {
	n := 0
	for _, r := range res {
		if !r.Duplicate {
			n++
		}
	}
	return n
}

// pushWake is how a push's statement wakes waiting handles.
type pushWake struct {
	inline bool // the statement wakes them; else a trailing wake-up does (notify.go)
	// self is a handle the statement passes over (wakeOthersFunction):
	// this process's, whose receivers Push wakes itself once the statement
	// has committed; "" for none.
	self string
}

// push inserts msgs through q and reports, per message, its id or that it
// was a duplicate. w says whom the statement wakes.
func (d *Driver) push(ctx context.Context, q querier, msgs []*driver.Message, w pushWake) ([]driver.PushResult, error) {
	cols, err := d.columns(msgs)
	if err != nil {
		return nil, err
	}
	stmt := d.sql.pushSQLFor(len(msgs) == 1, !d.cfg.syncPush)
	sql := stmt.plain
	if _, inTx := q.(pgx.Tx); inTx || d.dedupFirst() {
		// In a transaction (PushTx, or under a depth limit) a failed
		// statement would abort it; and while pushes keep meeting queued
		// tasks, the plain insert would fail (and the server log an
		// error) for each: insert with ON CONFLICT at once.
		sql = stmt.dedup
	}
	args := cols.args(d, msgs, w)
	if cols.groups != nil {
		// One statement stores the messages with their groups and counts
		// them (groups.go): the multi-row one, with ON CONFLICT.
		sql = d.sql.pushSQLFor(false, !d.cfg.syncPush).group
		args = append(cols.arrayArgs(d, w), cols.groups)
	}
	inserted, anonymous, err := readInserted(q.Query(ctx, sql, args...))
	if sql != stmt.dedup && isTaskIDConflict(err) {
		// A task is already queued (or is in the batch twice): the insert
		// stored nothing; insert again, skipping those.
		d.conflictAt.Store(time.Now().UnixNano())
		inserted, anonymous, err = readInserted(q.Query(ctx, stmt.dedup, args...))
	}
	if err != nil {
		return nil, err
	}
	res, dups := pushResults(msgs, inserted, anonymous)
	if len(dups) > 0 {
		if err := d.fillDuplicates(ctx, q, msgs, res, dups); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// pushColumns are a batch's messages as the push statement's arrays take
// them, a column per field.
type pushColumns struct {
	keys, bodies byteaArray
	prios        int4Array
	// delays are the microseconds from now to each message's NotBefore,
	// by this machine's clock, on which the caller reckoned NotBefore: the
	// statement adds them to the database's clock, so that a machine
	// whose clock is off still delays a task by what it asked for.
	delays       valuerArray[pgtype.Int8]
	ckeys, rkeys textArray
	traces       textArray // NULL unless a message is traced: unnest pads it
	groups       textArray // nil unless a message has a group
}

// columns checks each message's size and task id and lays msgs out in
// columns.
func (d *Driver) columns(msgs []*driver.Message) (pushColumns, error) {
	c := pushColumns{
		keys:   make(byteaArray, len(msgs)),
		bodies: make(byteaArray, len(msgs)),
		prios:  make(int4Array, len(msgs)),
		delays: make(valuerArray[pgtype.Int8], len(msgs)),
		ckeys:  make(textArray, len(msgs)),
		rkeys:  make(textArray, len(msgs)),
	}
	var now time.Time
	for i, m := range msgs {
		c.ckeys[i], c.rkeys[i] = m.ConcurrencyKey, m.RateLimitKey
		if m.TraceParent != "" {
			if c.traces == nil {
				c.traces = make(textArray, len(msgs))
			}
			c.traces[i] = m.TraceParent
		}
		if m.Group != "" {
			if c.groups == nil {
				c.groups = make(textArray, len(msgs))
			}
			c.groups[i] = m.Group
		}
		if len(m.Body) > d.cfg.maxMessageBytes {
			return c, driver.Errorf(errcode.TooLarge, "postgres push: message %q is %d bytes; this queue's limit is %d (max_message_bytes=)",
				m.ID, len(m.Body), d.cfg.maxMessageBytes)
		}
		if err := checkTaskID(m.ID); err != nil {
			return c, err
		}
		c.keys[i] = taskKey(m.ID)
		c.bodies[i] = bodypack.Encode(m.Body, m.ID)
		c.prios[i] = int32(m.Priority)
		if !m.NotBefore.IsZero() {
			if now.IsZero() {
				now = d.now()
			}
			c.delays[i] = pgtype.Int8{Int64: micros(m.NotBefore.Sub(now)), Valid: true}
		}
	}
	return c, nil
}

// args are the push statement's arguments for msgs, laid out in c: the
// columns, or for one message its values.
func (c *pushColumns) args(d *Driver, msgs []*driver.Message, w pushWake) []any {
	if len(msgs) == 1 {
		return []any{d.cfg.queue, c.keys[0], c.bodies[0], c.prios[0], c.delays[0], w.inline, wakePrefix, c.ckeys[0], c.rkeys[0], msgs[0].TraceParent, w.self}
	}
	return c.arrayArgs(d, w)
}

// arrayArgs are the multi-row push statement's arguments.
func (c *pushColumns) arrayArgs(d *Driver, w pushWake) []any {
	return []any{d.cfg.queue, c.keys, c.bodies, c.prios, c.delays, w.inline, wakePrefix, c.ckeys, c.rkeys, c.traces, w.self}
}

// pushResults are the push's results from the ids of the messages
// inserted, by task id and in order for those without one (readInserted);
// dups are the task ids of those not inserted, whose queued tasks'
// message ids fillDuplicates looks up.
func pushResults(msgs []*driver.Message, inserted map[string]int64, anonymous []int64) (res []driver.PushResult, dups []string) {
	res = make([]driver.PushResult, len(msgs))
	var reported map[string]bool
	if len(inserted) > 0 {
		reported = make(map[string]bool, len(inserted))
	}
	for i, m := range msgs {
		id, ok := inserted[m.ID]
		switch {
		case m.ID == "" && len(anonymous) > 0:
			res[i].MessageID = strconv.FormatInt(anonymous[0], 10)
			anonymous = anonymous[1:]
		case ok && !reported[m.ID]:
			res[i].MessageID = strconv.FormatInt(id, 10)
			reported[m.ID] = true
		case ok:
			// A second copy of a task in the same batch.
			res[i] = driver.PushResult{MessageID: strconv.FormatInt(id, 10), Duplicate: true}
		default:
			res[i].Duplicate = true
			dups = append(dups, m.ID)
		}
	}
	return res, dups
}

// dedupWindow is how long after a push found a task id taken the pushes
// of this queue insert with ON CONFLICT at once, rather than first without.
const dedupWindow = 10 * time.Second

// dedupFirst reports whether a push met a queued task id in the last
// dedupWindow: a workload that pushes duplicates (deterministic ids,
// a job file pushed again) then costs one failed statement per window, not
// one per push.
func (d *Driver) dedupFirst() bool {
	at := d.conflictAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < dedupWindow
}

// readInserted reads the push statement's rows: the message ids of the
// inserted tasks, by task id, and of those without one, in insert order.
// A third column, the one-task statement's notification, is skipped.
func readInserted(rows pgx.Rows, err error) (map[string]int64, []int64, error) {
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var inserted map[string]int64
	var anonymous []int64
	var id int64
	var key []byte
	dest := []any{&id, &key, nil}
	for rows.Next() {
		if err := rows.Scan(dest[:len(rows.FieldDescriptions())]...); err != nil {
			return nil, nil, err
		}
		taskID := taskIDOf(key)
		if taskID == "" {
			anonymous = append(anonymous, id)
			continue
		}
		if inserted == nil {
			inserted = make(map[string]int64)
		}
		inserted[taskID] = id
	}
	return inserted, anonymous, rows.Err()
}

// isTaskIDConflict reports whether err is the unique violation (SQLSTATE
// 23505) of a task id that is already queued.
func isTaskIDConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "messages_task_key"
}

// fillDuplicates looks up the message ids of tasks that were already queued.
// A message settled in the meantime keeps an empty MessageID.
func (d *Driver) fillDuplicates(ctx context.Context, q querier, msgs []*driver.Message, res []driver.PushResult, dups []string) error {
	rows, err := q.Query(ctx, d.sql.existing, d.cfg.queue, taskKeys(dups))
	if err != nil {
		return err
	}
	existing := map[string]int64{}
	for rows.Next() {
		var id int64
		var key []byte
		if err := rows.Scan(&id, &key); err != nil {
			rows.Close()
			return err
		}
		existing[taskIDOf(key)] = id
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, m := range msgs {
		if id, ok := existing[m.ID]; ok && res[i].Duplicate && res[i].MessageID == "" {
			res[i].MessageID = strconv.FormatInt(id, 10)
		}
	}
	return nil
}
