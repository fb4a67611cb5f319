package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
)

// Peek reads in two steps so that neither sorts message bodies: the ready
// messages in claim order straight off the claim index, then, if there is
// room, the others by when they become visible (only their keys are sorted).
const (
	peekReady = `
SELECT ` + peekColumns + `
FROM jobq_messages INDEXED BY jobq_messages_order
WHERE queue = ?1 AND visible_at <= ?2
ORDER BY priority DESC, id
LIMIT ?3`
	peekLater = `
SELECT ` + peekColumns + `
FROM jobq_messages
WHERE id IN (
	SELECT id FROM jobq_messages INDEXED BY jobq_messages_order
	WHERE queue = ?1 AND visible_at > ?2
	ORDER BY visible_at, id
	LIMIT ?3)
ORDER BY visible_at, id`
)

// peekColumns are what Peek reads, cast to the types it scans into: a
// row another tool wrote with text in a number column shows with 0 there
// rather than failing the peek. (The claim quarantines such rows.) A
// visible_at of 0 (visibleAtPush) shows as the push time. The task ID and
// body are read by loadTask.
const peekColumns = `id, task_id, body, id_at, CAST(deliveries AS INTEGER), CAST(enqueued_at AS INTEGER),
	CAST(CASE WHEN visible_at = 0 THEN enqueued_at ELSE visible_at END AS INTEGER), lease IS NOT NULL, CAST(priority AS INTEGER)`

// countMessages counts in one snapshot and one pass over the order index,
// which carries every column the counts need.
const countMessages = `
SELECT
	COALESCE(SUM(visible_at <= ?2), 0),
	COALESCE(SUM(visible_at > ?2 AND lease IS NOT NULL), 0),
	COALESCE(SUM(visible_at > ?2 AND lease IS NULL), 0),
	(SELECT COUNT(*) FROM jobq_dead WHERE queue = ?1)
FROM jobq_messages INDEXED BY jobq_messages_order
WHERE queue = ?1`

// Peek implements driver.Driver. In-flight messages are included, marked
// InFlight; nothing is changed.
func (d *Driver) Peek(ctx context.Context, max int) ([]*driver.PeekedMessage, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	// One read transaction on one connection, so both steps see the same
	// snapshot.
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, d.wrap(ctx, "peek", err)
	}
	defer func() { _ = tx.Rollback() }()
	now := micros(time.Now())
	out, err := peekRows(ctx, tx, peekReady, d.cfg.queue, now, max, nil)
	if err == nil && len(out) < max {
		out, err = peekRows(ctx, tx, peekLater, d.cfg.queue, now, max-len(out), out)
	}
	if err != nil {
		return nil, d.wrap(ctx, "peek", err)
	}
	return out, nil
}

// peekRows appends the messages query returns to out.
// extra are more query arguments, after queue, now and max.
func peekRows(ctx context.Context, tx *sql.Tx, query, queue string, now int64, max int, out []*driver.PeekedMessage, extra ...any) ([]*driver.PeekedMessage, error) {
	rows, err := tx.QueryContext(ctx, query, append([]any{queue, now, max}, extra...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			m                  driver.PeekedMessage
			id, enq, vis       int64
			leased             bool
			taskID, body, idAt any
		)
		if err := rows.Scan(&id, &taskID, &body, &idAt, &m.DeliveryCount, &enq, &vis, &leased, &m.Priority); err != nil {
			return nil, err
		}
		// A damaged row shows as well as it can be read.
		m.ID, m.Body, _ = loadTask(taskID, body, idAt)
		m.MessageID = strconv.FormatInt(id, 10)
		m.EnqueuedAt = fromMicros(enq)
		m.VisibleAt = fromMicros(vis)
		m.InFlight = leased && vis > now
		out = append(out, &m)
	}
	return out, rows.Err()
}

// Stats implements driver.Driver. The counts are exact and taken from one
// snapshot.
func (d *Driver) Stats(ctx context.Context) (driver.Stats, error) {
	if err := d.closing.Check(ctx); err != nil {
		return driver.Stats{}, err
	}
	s := driver.Stats{Known: driver.KnownCounts{Ready: true, InFlight: true, Delayed: true, Dead: true}}
	err := d.db.QueryRowContext(ctx, countMessages, d.cfg.queue, micros(time.Now())).
		Scan(&s.Ready, &s.InFlight, &s.Delayed, &s.Dead)
	if err != nil {
		return driver.Stats{}, d.wrap(ctx, "stats", err)
	}
	return s, nil
}

// Clear implements driver.Driver. It deletes in-flight messages too; their
// holders get LockLost when they settle.
func (d *Driver) Clear(ctx context.Context) (int64, error) {
	var n int64
	err := d.writeTx(ctx, "clear", func(tx wtx) error {
		res, err := tx.Exec(`DELETE FROM jobq_messages WHERE queue = ?`, d.cfg.queue)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err == nil {
		d.cursor.forget()
	}
	return n, err
}
