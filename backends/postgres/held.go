package postgres

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bodypack"
)

// Held tasks (driver.HeldStore, driver/held.go) are the rows of held_tasks
// (held, of schema step 5, holds the leases of capped keys): the message as
// a push stores it (task_key, packed_body, priority, not_before,
// keys, trace context, group) beside what it waits for (after and
// after_groups as JSON arrays, require). Its primary key (queue, task_id),
// task_id in COLLATE "C", orders ListHeld's pages bytewise and makes a
// second Hold of an ID a duplicate. Each operation is one statement: Hold
// inserts the batch and counts the groups' pushed; Release deletes the rows
// and inserts their messages (ON CONFLICT on the task key, as a push with
// dedup) and wakes receivers; Drop deletes them and counts the groups'
// cancelled. Release and Drop lock the rows in ID order first, so that
// sweepers racing over the same IDs wait for each other rather than
// deadlock, and the one that waited finds the rows gone. Claims and
// settlements never read the table; a push looks its task IDs up only when
// the queue holds a task (notHeld in queries.go): a held ID is a duplicate.

// heldTasksMigration is schema step 15 (heldMigration, step 5, is the
// concurrency policies' held leases).
const heldTasksMigration = `
CREATE TABLE {{s}}.held_tasks (
	queue           text COLLATE "C" NOT NULL,
	task_id         text COLLATE "C" NOT NULL,
	task_key        bytea NOT NULL,
	packed_body     bytea NOT NULL,
	priority        integer NOT NULL DEFAULT 0,
	not_before      timestamptz,
	concurrency_key text,
	rate_key        text,
	trace_parent    text,
	grp             text COLLATE "C",
	after           text NOT NULL DEFAULT '[]',
	after_groups    text NOT NULL DEFAULT '[]',
	require         text NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (queue, task_id)
);
`

// heldQueries are the statements of held tasks.
type heldQueries struct {
	hold, release, drop, list, of, find string
}

// heldColumns are what ListHeld and HeldOf read (scanHeld).
const heldColumns = `task_id, packed_body, priority, not_before, coalesce(concurrency_key, ''), coalesce(rate_key, ''),
	coalesce(trace_parent, ''), coalesce(grp, ''), after, after_groups, require, created_at`

// lockHeld is the CTE that locks the named held rows ($2) of queue $1 in
// ID order (see above).
const lockHeld = `WITH l AS (
	SELECT task_id FROM {{s}}.held_tasks WHERE queue = $1 AND task_id = ANY($2::text[]) ORDER BY task_id FOR UPDATE
)`

func buildHeldQueries(schema string) heldQueries {
	r := strings.NewReplacer("{{s}}", schema)
	return heldQueries{
		// hold inserts the batch's rows whose ID is neither queued nor
		// held (the first of two in the batch), returning their IDs, and
		// counts their groups' pushed.
		hold: r.Replace(`
WITH x AS (
	SELECT * FROM unnest($2::text[], $3::bytea[], $4::bytea[], $5::int[], $6::timestamptz[], $7::text[], $8::text[],
		$9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::timestamptz[]) WITH ORDINALITY
		AS x(task_id, task_key, body, priority, not_before, ckey, rkey, trace, grp, after, after_groups, req, created, ord)
), ins AS (
	INSERT INTO {{s}}.held_tasks (queue, task_id, task_key, packed_body, priority, not_before, concurrency_key, rate_key,
		trace_parent, grp, after, after_groups, require, created_at)
	SELECT $1, x.task_id, x.task_key, x.body, x.priority, x.not_before, NULLIF(x.ckey, ''), NULLIF(x.rkey, ''),
		NULLIF(x.trace, ''), NULLIF(x.grp, ''), x.after, x.after_groups, x.req, coalesce(x.created, now())
	FROM x WHERE NOT EXISTS (SELECT FROM {{s}}.messages m WHERE m.queue = $1 AND m.task_key = x.task_key)
	ORDER BY x.ord
	ON CONFLICT (queue, task_id) DO NOTHING
	RETURNING task_id, grp
), grp_count AS (
	INSERT INTO {{s}}.groups AS g (queue, name, pushed)
	SELECT $1, grp, count(*) FROM ins WHERE grp IS NOT NULL GROUP BY grp
	ON CONFLICT (queue, name) DO UPDATE SET pushed = g.pushed + excluded.pushed, updated_at = now()
)
SELECT task_id FROM ins`),
		// release moves the rows into messages as the push statement
		// stores them; a row whose task is queued meanwhile (pushed
		// without the hold) is not queued twice, and its group, which
		// counted it at Hold, counts it cancelled. It wakes one waiting
		// handle per message stored.
		release: r.Replace(lockHeld + `, h AS (
	DELETE FROM {{s}}.held_tasks USING l WHERE held_tasks.queue = $1 AND held_tasks.task_id = l.task_id
	RETURNING held_tasks.task_id, held_tasks.task_key, held_tasks.packed_body, held_tasks.priority, held_tasks.not_before,
		held_tasks.concurrency_key, held_tasks.rate_key, held_tasks.trace_parent, held_tasks.grp
), ins AS (
	INSERT INTO {{s}}.messages (queue, task_key, packed_body, priority, visible_at, concurrency_key, rate_key, trace_parent, grp)
	SELECT $1, task_key, packed_body, priority, coalesce(not_before, now()), concurrency_key, rate_key, trace_parent, grp
	FROM h ORDER BY task_id
	ON CONFLICT (queue, task_key) DO NOTHING
	RETURNING task_key
), dup AS (
	INSERT INTO {{s}}.groups AS g (queue, name, cancelled)
	SELECT $1, h.grp, count(*) FROM h WHERE h.grp IS NOT NULL AND NOT EXISTS (SELECT FROM ins WHERE ins.task_key = h.task_key)
	GROUP BY h.grp
	ON CONFLICT (queue, name) DO UPDATE SET cancelled = g.cancelled + excluded.cancelled, updated_at = now()
), n AS (
	SELECT {{s}}.wake($1, (SELECT count(*) FROM ins)::int, $3) WHERE EXISTS (SELECT FROM ins)
)
SELECT task_id FROM h WHERE (SELECT count(*) FROM n) >= 0`),
		drop: r.Replace(lockHeld + `, h AS (
	DELETE FROM {{s}}.held_tasks USING l WHERE held_tasks.queue = $1 AND held_tasks.task_id = l.task_id
	RETURNING held_tasks.task_id, held_tasks.grp
), c AS (
	INSERT INTO {{s}}.groups AS g (queue, name, cancelled)
	SELECT $1, grp, count(*) FROM h WHERE grp IS NOT NULL GROUP BY grp
	ON CONFLICT (queue, name) DO UPDATE SET cancelled = g.cancelled + excluded.cancelled, updated_at = now()
)
SELECT task_id FROM h`),
		// list reads one page off the primary key, one row more than the
		// page to tell whether another follows.
		list: r.Replace(`SELECT ` + heldColumns + ` FROM {{s}}.held_tasks WHERE queue = $1 AND task_id > $2 ORDER BY task_id LIMIT $3`),
		of:   r.Replace(`SELECT ` + heldColumns + ` FROM {{s}}.held_tasks WHERE queue = $1 AND task_id = ANY($2::text[])`),
		find: r.Replace(findTasksSQL),
	}
}

var _ driver.HeldStore = (*Driver)(nil)

// heldArgs are the hold statement's arrays, a column per field.
type heldArgs struct {
	ids, ckeys, rkeys, traces, grps, after, groups, reqs []string
	keys, bodies                                         [][]byte
	prios                                                []int32
	notBefore, created                                   []pgtype.Timestamptz
}

// newHeldArgs checks msgs and lays them out in columns.
func (d *Driver) newHeldArgs(msgs []*driver.HeldMessage) (*heldArgs, error) {
	n := len(msgs)
	a := &heldArgs{
		ids: make([]string, n), ckeys: make([]string, n), rkeys: make([]string, n), traces: make([]string, n),
		grps: make([]string, n), after: make([]string, n), groups: make([]string, n), reqs: make([]string, n),
		keys: make([][]byte, n), bodies: make([][]byte, n), prios: make([]int32, n),
		notBefore: make([]pgtype.Timestamptz, n), created: make([]pgtype.Timestamptz, n),
	}
	for i, h := range msgs {
		m := &h.Message
		if m.ID == "" {
			return nil, driver.Errorf(errcode.InvalidArgument, "postgres hold: a held message needs a task ID")
		}
		if err := checkTaskID(m.ID); err != nil {
			return nil, err
		}
		if len(m.Body) > d.cfg.maxMessageBytes {
			return nil, driver.Errorf(errcode.TooLarge, "postgres hold: message %q is %d bytes; this queue's limit is %d (max_message_bytes=)",
				m.ID, len(m.Body), d.cfg.maxMessageBytes)
		}
		after, err := json.Marshal(nonNilStrings(h.After))
		if err != nil {
			return nil, err
		}
		groups, err := json.Marshal(nonNilStrings(h.AfterGroups))
		if err != nil {
			return nil, err
		}
		a.ids[i], a.keys[i], a.bodies[i], a.prios[i] = m.ID, taskKey(m.ID), bodypack.Encode(m.Body, m.ID), int32(m.Priority)
		a.ckeys[i], a.rkeys[i], a.traces[i], a.grps[i] = m.ConcurrencyKey, m.RateLimitKey, m.TraceParent, m.Group
		a.after[i], a.groups[i], a.reqs[i] = string(after), string(groups), string(h.Require)
		if !m.NotBefore.IsZero() {
			a.notBefore[i] = pgtype.Timestamptz{Time: m.NotBefore, Valid: true}
		}
		if !h.Created.IsZero() {
			a.created[i] = pgtype.Timestamptz{Time: h.Created, Valid: true}
		}
	}
	return a, nil
}

// nonNilStrings makes nil an empty list, which JSON writes as [].
func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Hold implements driver.HeldStore: one statement for the batch.
func (d *Driver) Hold(ctx context.Context, msgs []*driver.HeldMessage) ([]driver.PushResult, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	a, err := d.newHeldArgs(msgs)
	if err != nil {
		return nil, err
	}
	stored, err := d.heldIDs(ctx, "hold", d.hsql.hold, d.cfg.queue, a.ids, a.keys, a.bodies, a.prios, a.notBefore,
		a.ckeys, a.rkeys, a.traces, a.grps, a.after, a.groups, a.reqs, a.created)
	if err != nil {
		return nil, err
	}
	fresh := make(map[string]bool, len(stored))
	for _, id := range stored {
		fresh[id] = true
	}
	out := make([]driver.PushResult, len(msgs))
	for i, h := range msgs {
		// The first copy of an ID stored is the one the statement kept.
		out[i].Duplicate = !fresh[h.Message.ID]
		delete(fresh, h.Message.ID)
	}
	return out, nil
}

// Release implements driver.HeldStore: one statement moves the held rows
// into the queue (see above).
func (d *Driver) Release(ctx context.Context, ids []string) ([]string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := d.heldIDs(ctx, "release held", d.hsql.release, d.cfg.queue, ids, wakePrefix)
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		d.wake.Notify(-1) // receivers in this process need not wait for the notification
	}
	return out, nil
}

// Drop implements driver.HeldStore: one statement.
func (d *Driver) Drop(ctx context.Context, ids []string) ([]string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return d.heldIDs(ctx, "drop held", d.hsql.drop, d.cfg.queue, ids)
}

// heldIDs runs a statement that returns task IDs.
func (d *Driver) heldIDs(ctx context.Context, op, sql string, args ...any) ([]string, error) {
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	return out, nil
}

// ListHeld implements driver.HeldStore: one read off the primary key.
func (d *Driver) ListHeld(ctx context.Context, cursor string, limit int) ([]*driver.HeldMessage, string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, "", err
	}
	if limit < 1 {
		return nil, "", driver.Errorf(errcode.InvalidArgument, "postgres list held: limit %d; want at least 1", limit)
	}
	out, err := d.readHeld(ctx, "list held", d.hsql.list, d.cfg.queue, cursor, limit+1)
	if err != nil || len(out) <= limit {
		return out, "", err
	}
	out = out[:limit]
	return out, out[limit-1].Message.ID, nil
}

// HeldOf implements driver.HeldStore: one read.
func (d *Driver) HeldOf(ctx context.Context, ids []string) ([]*driver.HeldMessage, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return d.readHeld(ctx, "held of", d.hsql.of, d.cfg.queue, ids)
}

// readHeld runs a query that selects heldColumns and reads its rows.
func (d *Driver) readHeld(ctx context.Context, op, sql string, args ...any) ([]*driver.HeldMessage, error) {
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, scanHeld)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	return out, nil
}

// scanHeld reads one row of heldColumns.
func scanHeld(row pgx.CollectableRow) (*driver.HeldMessage, error) {
	var (
		h                  driver.HeldMessage
		m                  = &h.Message
		packed             []byte
		prio               int32
		nb, created        pgtype.Timestamptz
		after, groups, req string
	)
	if err := row.Scan(&m.ID, &packed, &prio, &nb, &m.ConcurrencyKey, &m.RateLimitKey, &m.TraceParent, &m.Group,
		&after, &groups, &req, &created); err != nil {
		return nil, err
	}
	m.Body, _ = loadBody(packed, m.ID)
	m.Priority, m.NotBefore = int(prio), nb.Time
	h.Require, h.Created = driver.HeldRequire(req), created.Time
	if err := json.Unmarshal([]byte(after), &h.After); err != nil {
		return nil, driver.Errorf(errcode.Internal, "postgres: held task %q has an after list that is not JSON: %v", m.ID, err)
	}
	if err := json.Unmarshal([]byte(groups), &h.AfterGroups); err != nil {
		return nil, driver.Errorf(errcode.Internal, "postgres: held task %q has an after-groups list that is not JSON: %v", m.ID, err)
	}
	if len(h.After) == 0 {
		h.After = nil
	}
	if len(h.AfterGroups) == 0 {
		h.AfterGroups = nil
	}
	return &h, nil
}
