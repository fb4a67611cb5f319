package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
)

// Peek implements driver.Driver.
func (d *Driver) Peek(ctx context.Context, max int) ([]*driver.PeekedMessage, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, d.sql.peek, d.cfg.queue, max)
	if err != nil {
		return nil, wrap(ctx, "peek", err)
	}
	defer rows.Close()
	var out []*driver.PeekedMessage
	for rows.Next() {
		var id int64
		var deliveries, priority int32
		var enqueued, visible pgtype.Timestamptz
		var key, stored []byte
		m := &driver.PeekedMessage{}
		if err := rows.Scan(&id, &key, &stored, &deliveries, &enqueued, &visible, &m.InFlight, &priority); err != nil {
			return nil, wrap(ctx, "peek", err)
		}
		m.ID = taskIDOf(key)
		m.Body, _ = loadBody(stored, m.ID)
		m.EnqueuedAt, m.VisibleAt = enqueued.Time, visible.Time // zero for ±infinity
		m.MessageID = strconv.FormatInt(id, 10)
		m.DeliveryCount = int(deliveries)
		m.Priority = int(priority)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "peek", err)
	}
	return out, nil
}

// Stats implements driver.Driver; every count is exact.
func (d *Driver) Stats(ctx context.Context) (driver.Stats, error) {
	if err := d.closing.Err(); err != nil {
		return driver.Stats{}, err
	}
	var s driver.Stats
	err := d.pool.QueryRow(ctx, d.sql.stats, d.cfg.queue).Scan(&s.Ready, &s.InFlight, &s.Delayed, &s.Dead)
	if err != nil {
		return driver.Stats{}, wrap(ctx, "stats", err)
	}
	s.Known = driver.KnownCounts{Ready: true, InFlight: true, Delayed: true, Dead: true}
	return s, nil
}

// Clear implements driver.Driver. In-flight messages are deleted too; their
// holders get LockLost when they settle.
func (d *Driver) Clear(ctx context.Context) (int64, error) {
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	tag, err := d.pool.Exec(ctx, d.sql.clear, d.cfg.queue)
	if err != nil {
		return 0, wrap(ctx, "clear", err)
	}
	d.deletedRows(tag.RowsAffected())
	return tag.RowsAffected(), nil
}
