package sqlite

import (
	"context"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
)

// peekMessages lists messages in the order they would be received: ready
// ones by priority then push order, then the others by when they become
// visible.
const peekMessages = `
SELECT id, task_id, body, deliveries, enqueued_at, visible_at, lease IS NOT NULL, priority
FROM jobq_messages
WHERE queue = ?1
ORDER BY visible_at > ?2,
	CASE WHEN visible_at <= ?2 THEN -priority ELSE visible_at END,
	id
LIMIT ?3`

const countMessages = `
SELECT
	COALESCE(SUM(visible_at <= ?2), 0),
	COALESCE(SUM(visible_at > ?2 AND lease IS NOT NULL), 0),
	COALESCE(SUM(visible_at > ?2 AND lease IS NULL), 0),
	(SELECT COUNT(*) FROM jobq_dead WHERE queue = ?1)
FROM jobq_messages WHERE queue = ?1`

// Peek implements driver.Driver. In-flight messages are included, marked
// InFlight; nothing is changed.
func (d *Driver) Peek(ctx context.Context, max int) ([]*driver.PeekedMessage, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	now := micros(time.Now())
	rows, err := d.db.QueryContext(ctx, peekMessages, d.cfg.queue, now, max)
	if err != nil {
		return nil, d.wrap(ctx, "peek", err)
	}
	defer rows.Close()
	var out []*driver.PeekedMessage
	for rows.Next() {
		var (
			m            driver.PeekedMessage
			id, enq, vis int64
			leased       bool
		)
		if err := rows.Scan(&id, &m.ID, &m.Body, &m.DeliveryCount, &enq, &vis, &leased, &m.Priority); err != nil {
			return nil, d.wrap(ctx, "peek", err)
		}
		m.MessageID = strconv.FormatInt(id, 10)
		m.EnqueuedAt = fromMicros(enq)
		m.VisibleAt = fromMicros(vis)
		m.InFlight = leased && vis > now
		out = append(out, &m)
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap(ctx, "peek", err)
	}
	return out, nil
}

// Stats implements driver.Driver. The counts are exact and taken from one
// snapshot.
func (d *Driver) Stats(ctx context.Context) (driver.Stats, error) {
	if err := d.check(ctx); err != nil {
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
	return n, err
}
