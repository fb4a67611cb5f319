package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Held tasks (driver.HeldStore, driver/held.go) are the rows of jobq_held:
// the message as Push would store it (body whole, priority, not-before,
// keys, trace context, group) beside what it waits for (after and
// after_groups as JSON arrays, require). Its primary key (queue, task_id)
// orders ListHeld's pages and makes a second Hold of an ID a duplicate;
// task_id is the ID as text, so pages come in the IDs' byte order. Release
// deletes the row and inserts the message, with the statements of Push,
// in one write transaction; Drop deletes it. Claims and settlements never
// read the table, and a push asks whether the queue holds a task with the
// max-depth policy it reads anyway (pushChecks): a held ID is a duplicate
// (notHeld).

// heldTable is schema step "held tasks" (migrateHeld).
const heldTable = `
CREATE TABLE IF NOT EXISTS jobq_held (
	queue           TEXT    NOT NULL,
	task_id         TEXT    NOT NULL,
	body            BLOB    NOT NULL,
	priority        INTEGER NOT NULL DEFAULT 0,
	not_before      INTEGER NOT NULL DEFAULT 0,
	concurrency_key TEXT    NOT NULL DEFAULT '',
	rate_key        TEXT    NOT NULL DEFAULT '',
	trace_parent    TEXT    NOT NULL DEFAULT '',
	grp             TEXT    NOT NULL DEFAULT '',
	after           TEXT    NOT NULL DEFAULT '[]',
	after_groups    TEXT    NOT NULL DEFAULT '[]',
	require         TEXT    NOT NULL DEFAULT '',
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (queue, task_id)
);
`

// migrateHeld creates jobq_held. It runs inside migrate's transaction.
func migrateHeld(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, heldTable)
	return err
}

const (
	// queuedTask finds a live message with the task key ?2 (as the dedup
	// trigger jobq_messages_dedup does).
	queuedTask = `SELECT 1 FROM jobq_task_keys k JOIN jobq_messages m ON m.id = k.message_id
		WHERE k.queue = ?1 AND k.task_id = ?2`
	insertHeld = `INSERT INTO jobq_held (queue, task_id, body, priority, not_before, concurrency_key, rate_key,
			trace_parent, grp, after, after_groups, require, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (queue, task_id) DO NOTHING
		RETURNING 1`
	heldColumns = `task_id, body, priority, not_before, concurrency_key, rate_key, trace_parent, grp,
		after, after_groups, require, created_at`
	// takeHeld deletes a held row, returning what Release pushes.
	takeHeld = `DELETE FROM jobq_held WHERE queue = ? AND task_id = ?
		RETURNING body, priority, not_before, concurrency_key, rate_key, trace_parent, grp`
	dropHeld = `DELETE FROM jobq_held WHERE queue = ? AND task_id = ? RETURNING grp`
	// listHeld reads one page in ID order, one row more than the page to
	// tell whether another follows.
	listHeld = `SELECT ` + heldColumns + ` FROM jobq_held WHERE queue = ? AND task_id > ? ORDER BY task_id LIMIT ?`
	heldOf   = `SELECT ` + heldColumns + ` FROM jobq_held WHERE queue = ?1 AND task_id IN (SELECT value FROM json_each(?2))`
)

var _ driver.HeldStore = (*Driver)(nil)

// heldIDs are the IDs among ?2 (a JSON list) that the queue holds.
const heldIDs = `SELECT task_id FROM jobq_held WHERE queue = ?1 AND task_id IN (SELECT value FROM json_each(?2))`

// notHeld leaves out of a push to a queue that holds tasks (pushChecks)
// the messages whose task ID is held: each is a duplicate, as for Hold,
// marked so in out, since stored it would run ahead of the held copy's
// parents, and again at its release. It returns the messages to store
// and, when it left one out, their indexes in msgs (at is nil when todo is
// msgs).
func (d *Driver) notHeld(tx wtx, msgs []*driver.Message, out []driver.PushResult) (todo []*driver.Message, at []int, err error) {
	ids := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	rows, err := tx.Query(heldIDs, d.cfg.queue, jsonList(ids))
	if err != nil {
		return nil, nil, err
	}
	held := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, nil, err
		}
		held[id] = true
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, nil, err
	}
	if len(held) == 0 {
		return msgs, nil, nil
	}
	for i, m := range msgs {
		if m.ID != "" && held[m.ID] {
			out[i] = driver.PushResult{Duplicate: true}
			continue
		}
		todo, at = append(todo, m), append(at, i)
	}
	return todo, at, nil
}

// Hold implements driver.HeldStore: one write transaction for the batch.
func (d *Driver) Hold(ctx context.Context, msgs []*driver.HeldMessage) ([]driver.PushResult, error) {
	if len(msgs) == 0 {
		return nil, d.closing.Check(ctx)
	}
	for _, m := range msgs {
		if m.Message.ID == "" {
			return nil, driver.Errorf(errcode.InvalidArgument, "sqlite hold: a held message needs a task ID")
		}
	}
	out := make([]driver.PushResult, len(msgs))
	err := d.writeTx(ctx, "hold", func(tx wtx) error {
		now := micros(time.Now())
		for i, h := range msgs {
			dup, err := d.holdOne(tx, h, now)
			if err != nil {
				return err
			}
			out[i] = driver.PushResult{Duplicate: dup}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// holdOne stores h in tx unless its ID is held or queued already (then it
// reports a duplicate), counting its group's pushed.
func (d *Driver) holdOne(tx wtx, h *driver.HeldMessage, now int64) (dup bool, err error) {
	m := &h.Message
	var one int
	switch err := tx.QueryRow(queuedTask, d.cfg.queue, taskKey(m.ID)).Scan(&one); {
	case err == nil:
		return true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, err
	}
	after, err := json.Marshal(nonNilStrings(h.After))
	if err != nil {
		return false, err
	}
	groups, err := json.Marshal(nonNilStrings(h.AfterGroups))
	if err != nil {
		return false, err
	}
	var nb int64
	if !m.NotBefore.IsZero() {
		nb = micros(m.NotBefore)
	}
	created := now
	if !h.Created.IsZero() {
		created = micros(h.Created)
	}
	err = tx.QueryRow(insertHeld, d.cfg.queue, m.ID, nonNil(m.Body), m.Priority, nb, m.ConcurrencyKey, m.RateLimitKey,
		m.TraceParent, m.Group, string(after), string(groups), string(h.Require), created).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil // held already
	}
	if err != nil {
		return false, err
	}
	return false, d.countGroup(tx, m.Group, "pushed", 1, now)
}

// nonNilStrings makes nil an empty list, which JSON writes as [].
func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Release implements driver.HeldStore: in one write transaction each held
// row is deleted and its message inserted as Push inserts it, so a
// concurrent Release finds the row gone and leaves the ID out. A message
// whose ID was queued meanwhile (pushed without the hold) is not queued
// twice: its held copy is removed, reported released, and counted
// cancelled in its group, which counted it at Hold.
func (d *Driver) Release(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, d.closing.Check(ctx)
	}
	var released []string
	err := d.writeTx(ctx, "release held", func(tx wtx) error {
		released = released[:0]
		now := micros(time.Now())
		added := 0
		for _, id := range ids {
			moved, stored, err := d.releaseOne(tx, id, now)
			if err != nil {
				return err
			}
			if moved {
				released = append(released, id)
			}
			if stored {
				added++
			}
		}
		return d.sweepOnPush(tx, added)
	})
	if err != nil {
		return nil, err
	}
	if len(released) > 0 {
		d.note.broadcast()
	}
	return released, nil
}

// releaseOne moves held task id into the queue in tx: moved when it was
// held, stored when its message was inserted (not a duplicate).
func (d *Driver) releaseOne(tx wtx, id string, now int64) (moved, stored bool, err error) {
	var (
		body               []byte
		prio               int
		nb                 int64
		ckey, rkey, tr, gr string
	)
	err = tx.QueryRow(takeHeld, d.cfg.queue, id).Scan(&body, &prio, &nb, &ckey, &rkey, &tr, &gr)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	visible := visibleAtPush
	if nb > now {
		visible = nb
	}
	st := storeTask(id, body)
	var mid int64
	if gr == "" {
		err = tx.QueryRow(insertMessage, d.cfg.queue, st.key, st.body, st.idAt, prio, visible, now, ckey, rkey, tr).Scan(&mid)
	} else {
		err = tx.QueryRow(insertGroupMessage, d.cfg.queue, st.key, st.body, st.idAt, prio, visible, now, ckey, rkey, tr, gr).Scan(&mid)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return true, false, d.countGroup(tx, gr, "cancelled", 1, now)
	}
	return err == nil, err == nil, err
}

// Drop implements driver.HeldStore: one write transaction deletes the held
// rows and counts the grouped ones cancelled.
func (d *Driver) Drop(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, d.closing.Check(ctx)
	}
	var dropped []string
	err := d.writeTx(ctx, "drop held", func(tx wtx) error {
		dropped = dropped[:0]
		now := micros(time.Now())
		for _, id := range ids {
			var grp string
			err := tx.QueryRow(dropHeld, d.cfg.queue, id).Scan(&grp)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			dropped = append(dropped, id)
			if err := d.countGroup(tx, grp, "cancelled", 1, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return dropped, nil
}

// ListHeld implements driver.HeldStore: one indexed read of the page (an
// empty queue's is one index probe).
func (d *Driver) ListHeld(ctx context.Context, cursor string, limit int) ([]*driver.HeldMessage, string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	if limit < 1 {
		return nil, "", driver.Errorf(errcode.InvalidArgument, "sqlite list held: limit %d; want at least 1", limit)
	}
	out, err := d.readHeld(ctx, "list held", listHeld, d.cfg.queue, cursor, limit+1)
	if err != nil || len(out) <= limit {
		return out, "", err
	}
	out = out[:limit]
	return out, out[limit-1].Message.ID, nil
}

// HeldOf implements driver.HeldStore: one read.
func (d *Driver) HeldOf(ctx context.Context, ids []string) ([]*driver.HeldMessage, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	return d.readHeld(ctx, "held of", heldOf, d.cfg.queue, string(list))
}

// readHeld runs query, which selects heldColumns, and reads its rows.
func (d *Driver) readHeld(ctx context.Context, op, query string, args ...any) ([]*driver.HeldMessage, error) {
	rows, err := d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, d.wrap(ctx, op, err)
	}
	defer rows.Close()
	var out []*driver.HeldMessage
	for rows.Next() {
		h, err := scanHeld(rows)
		if err != nil {
			return nil, d.wrap(ctx, op, err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap(ctx, op, err)
	}
	return out, nil
}

// scanHeld reads one row of heldColumns.
func scanHeld(r rowScanner) (*driver.HeldMessage, error) {
	var (
		h             driver.HeldMessage
		nb, created   int64
		after, groups string
		require       string
		m             = &h.Message
	)
	if err := r.Scan(&m.ID, &m.Body, &m.Priority, &nb, &m.ConcurrencyKey, &m.RateLimitKey, &m.TraceParent, &m.Group,
		&after, &groups, &require, &created); err != nil {
		return nil, err
	}
	if nb != 0 {
		m.NotBefore = fromMicros(nb)
	}
	h.Created, h.Require = fromMicros(created), driver.HeldRequire(require)
	if err := json.Unmarshal([]byte(after), &h.After); err != nil {
		return nil, driver.Errorf(errcode.Internal, "sqlite: held task %q has an after list that is not JSON: %v", m.ID, err)
	}
	if err := json.Unmarshal([]byte(groups), &h.AfterGroups); err != nil {
		return nil, driver.Errorf(errcode.Internal, "sqlite: held task %q has an after-groups list that is not JSON: %v", m.ID, err)
	}
	if len(h.After) == 0 {
		h.After = nil
	}
	if len(h.AfterGroups) == 0 {
		h.AfterGroups = nil
	}
	return &h, nil
}
