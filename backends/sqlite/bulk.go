package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

const (
	// pageQueued reads queued (not leased) messages by row id after ?4,
	// off the primary key: one short read per page.
	pageQueued = `
SELECT ` + peekColumns + `
FROM jobq_messages
WHERE id > ?4 AND queue = ?1 AND NOT (lease IS NOT NULL AND visible_at > ?2)
ORDER BY id
LIMIT ?3`
	// pageDead reads dead letters by row id after ?2.
	pageDead = `SELECT id, task_id, body, id_at, CAST(reason AS TEXT), CAST(detail AS TEXT),
		CAST(deliveries AS INTEGER), CAST(dead_at AS INTEGER)
		FROM jobq_dead WHERE id > ?2 AND queue = ?1 ORDER BY id LIMIT ?3`
)

// PageQueued implements driver.Pager: queued messages by row id, which
// is also the cursor.
func (d *Driver) PageQueued(ctx context.Context, after string, max int) ([]*driver.PeekedMessage, string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	from, err := rowCursor(after)
	if err != nil || max < 1 {
		return nil, "", err
	}
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, "", d.wrap(ctx, "page queued messages", err)
	}
	defer func() { _ = tx.Rollback() }()
	out, err := peekRows(ctx, tx, pageQueued, d.cfg.queue, micros(time.Now()), max, nil, from)
	if err != nil {
		return nil, "", d.wrap(ctx, "page queued messages", err)
	}
	next := ""
	if len(out) == max {
		next = out[max-1].MessageID
	}
	return out, next, nil
}

// PageDead implements driver.Pager: dead letters by row id.
func (d *Driver) PageDead(ctx context.Context, after string, max int) ([]*driver.DeadMessage, string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	from, err := rowCursor(after)
	if err != nil || max < 1 {
		return nil, "", err
	}
	out, err := d.deadRows(ctx, pageDead, d.cfg.queue, from, max)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) == max {
		next = out[max-1].MessageID
	}
	return out, next, nil
}

// rowCursor parses a page cursor: "" or a row id.
func rowCursor(after string) (int64, error) {
	if after == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil {
		return 0, driver.Errorf(errcode.InvalidArgument, "sqlite: page cursor %q is not one this driver returned", after)
	}
	return n, nil
}
