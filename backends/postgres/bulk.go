package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// pageQueuedSQL reads queued (not leased) messages in claim-index order
// (priority descending, then id) after the cursor ($2, $3): the rest of
// the cursor's priority, then the lower priorities, each an index range,
// so a page costs the same at the end of a large queue as at its start
// (the outer ORDER BY merges at most twice max rows).
const pageQueuedSQL = `
(SELECT id, task_key, packed_body, deliveries, enqueued_at, visible_at, priority
 FROM {{s}}.messages
 WHERE queue = $1 AND priority = $2 AND id > $3 AND NOT (lease IS NOT NULL AND visible_at > now())
 ORDER BY priority DESC, id LIMIT $4)
UNION ALL
(SELECT id, task_key, packed_body, deliveries, enqueued_at, visible_at, priority
 FROM {{s}}.messages
 WHERE queue = $1 AND priority < $2 AND NOT (lease IS NOT NULL AND visible_at > now())
 ORDER BY priority DESC, id LIMIT $4)
ORDER BY priority DESC, id
LIMIT $4`

// pageDeadSQL reads dead letters by id after the cursor $2.
const pageDeadSQL = `
SELECT id, task_key, packed_body, reason, detail, deliveries, dead_at
FROM {{s}}.dead_letters
WHERE id > $2 AND queue = $1
ORDER BY id
LIMIT $3`

// bulkSQL returns q with the queue's schema filled in.
func (d *Driver) bulkSQL(q string) string {
	return strings.ReplaceAll(q, "{{s}}", pgx.Identifier{d.cfg.schema}.Sanitize())
}

// PageQueued implements driver.Pager; the cursor is the last message's
// priority and id.
func (d *Driver) PageQueued(ctx context.Context, after string, max int) ([]*driver.PeekedMessage, string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, "", err
	}
	prio, id := int64(driver.MaxPriority)+1, int64(0)
	if after != "" {
		if _, err := fmt.Sscanf(after, "%d:%d", &prio, &id); err != nil {
			return nil, "", driver.Errorf(errcode.InvalidArgument, "postgres: page cursor %q is not one this driver returned", after)
		}
	}
	if max < 1 {
		return nil, "", nil
	}
	rows, err := d.pool.Query(ctx, d.bulkSQL(pageQueuedSQL), d.cfg.queue, prio, id, max)
	if err != nil {
		return nil, "", wrap(ctx, "page queued messages", err)
	}
	defer rows.Close()
	var out []*driver.PeekedMessage
	for rows.Next() {
		var mid int64
		var deliveries, priority int32
		var enqueued, visible pgtype.Timestamptz
		var key, stored []byte
		if err := rows.Scan(&mid, &key, &stored, &deliveries, &enqueued, &visible, &priority); err != nil {
			return nil, "", wrap(ctx, "page queued messages", err)
		}
		m := &driver.PeekedMessage{MessageID: strconv.FormatInt(mid, 10), ID: taskIDOf(key),
			DeliveryCount: int(deliveries), Priority: int(priority), EnqueuedAt: enqueued.Time, VisibleAt: visible.Time}
		m.Body, _ = loadBody(stored, m.ID)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, "", wrap(ctx, "page queued messages", err)
	}
	next := ""
	if len(out) == max {
		last := out[max-1]
		next = fmt.Sprintf("%d:%s", last.Priority, last.MessageID)
	}
	return out, next, nil
}

// PageDead implements driver.Pager; the cursor is the last dead letter's
// id.
func (d *Driver) PageDead(ctx context.Context, after string, max int) ([]*driver.DeadMessage, string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, "", err
	}
	var from int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil {
			return nil, "", driver.Errorf(errcode.InvalidArgument, "postgres: page cursor %q is not one this driver returned", after)
		}
		from = n
	}
	if max < 1 {
		return nil, "", nil
	}
	rows, err := d.pool.Query(ctx, d.bulkSQL(pageDeadSQL), d.cfg.queue, from, max)
	if err != nil {
		return nil, "", wrap(ctx, "page dead letters", err)
	}
	out, err := scanDead(ctx, "page dead letters", rows)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) == max {
		next = out[max-1].MessageID
	}
	return out, next, nil
}
