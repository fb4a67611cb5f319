package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
)

// ListDead implements driver.Driver.
func (d *Driver) ListDead(ctx context.Context, max int) ([]*driver.DeadMessage, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, d.sql.listDead, d.cfg.queue, max)
	if err != nil {
		return nil, wrap(ctx, "list dead letters", err)
	}
	return scanDead(ctx, "list dead letters", rows)
}

// scanDead reads the dead letters that a listing or a page returned, as
// columns (id, task_key, body, reason, detail, deliveries, dead_at).
func scanDead(ctx context.Context, op string, rows pgx.Rows) ([]*driver.DeadMessage, error) {
	defer rows.Close()
	var out []*driver.DeadMessage
	for rows.Next() {
		var id int64
		var deliveries int32
		var deadAt pgtype.Timestamptz
		var key, stored []byte
		m := &driver.DeadMessage{}
		if err := rows.Scan(&id, &key, &stored, &m.Reason, &m.Detail, &deliveries, &deadAt); err != nil {
			return nil, wrap(ctx, op, err)
		}
		m.ID = taskIDOf(key)
		m.Body, _ = loadBody(stored, m.ID)
		m.DeadAt = deadAt.Time // zero for ±infinity
		m.MessageID = strconv.FormatInt(id, 10)
		m.DeliveryCount = int(deliveries)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, op, err)
	}
	return out, nil
}

// deadIDs parses dead-letter ids; nil stays nil (meaning all). Ids that are
// not numbers cannot name a dead letter here and are skipped.
func deadIDs(ids []string) []int64 {
	if ids == nil {
		return nil
	}
	out := make([]int64, 0, len(ids))
	for _, s := range ids {
		if id, err := strconv.ParseInt(s, 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// RequeueDead implements driver.Driver: one statement deletes the dead
// letters and queues them again, so none is lost or doubled by a crash.
func (d *Driver) RequeueDead(ctx context.Context, ids []string) (int64, error) {
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	var moved, notified int64
	err := d.pool.QueryRow(ctx, d.sql.requeueDead, d.cfg.queue, deadIDs(ids), wakePrefix).Scan(&moved, &notified)
	if err != nil {
		return 0, wrap(ctx, "requeue dead letters", err)
	}
	d.wake.Notify(-1)
	return moved, nil
}

// PurgeDead implements driver.Driver.
func (d *Driver) PurgeDead(ctx context.Context, ids []string) (int64, error) {
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	tag, err := d.pool.Exec(ctx, d.sql.purgeDead, d.cfg.queue, deadIDs(ids))
	if err != nil {
		return 0, wrap(ctx, "purge dead letters", err)
	}
	return tag.RowsAffected(), nil
}
