package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
)

// insertMessage stores one message unless a message with the same task ID is
// still in the queue (the trigger jobq_messages_dedup, keys.go); RETURNING
// then yields no row.
const insertMessage = `
INSERT INTO jobq_messages (queue, task_id, body, id_at, priority, visible_at, enqueued_at, concurrency_key, rate_key, trace_parent)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id`

// insertGroupMessage is insertMessage of a message with a group.
const insertGroupMessage = `
INSERT INTO jobq_messages (queue, task_id, body, id_at, priority, visible_at, enqueued_at, concurrency_key, rate_key, trace_parent, grp)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id`

// Push implements driver.Driver. The whole batch is stored in one
// transaction: on error nothing was stored. A batch that would take the
// queue past its max-depth policy is refused whole (policy.go).
func (d *Driver) Push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	if len(msgs) == 0 {
		return nil, d.closing.Check(ctx)
	}
	out := make([]driver.PushResult, len(msgs))
	err := d.writeTx(ctx, "push", func(tx wtx) error {
		now := micros(time.Now())
		added := 0
		for i, m := range msgs {
			visible := visibleAtPush
			if !m.NotBefore.IsZero() && micros(m.NotBefore) > now {
				visible = micros(m.NotBefore)
			}
			var id int64
			st := storeTask(m.ID, m.Body)
			var err error
			if m.Group == "" {
				err = tx.QueryRow(insertMessage, d.cfg.queue, st.key, st.body, st.idAt, m.Priority, visible, now, m.ConcurrencyKey, m.RateLimitKey, m.TraceParent).Scan(&id)
			} else {
				err = tx.QueryRow(insertGroupMessage, d.cfg.queue, st.key, st.body, st.idAt, m.Priority, visible, now, m.ConcurrencyKey, m.RateLimitKey, m.TraceParent, m.Group).Scan(&id)
			}
			if errors.Is(err, sql.ErrNoRows) {
				// A message with this task ID is queued already.
				if err := tx.QueryRow(keyMessage, d.cfg.queue, st.key).Scan(&id); err != nil {
					return err
				}
				out[i] = driver.PushResult{MessageID: strconv.FormatInt(id, 10), Duplicate: true}
				continue
			}
			if err != nil {
				return err
			}
			out[i] = driver.PushResult{MessageID: strconv.FormatInt(id, 10)}
			added++
			if err := d.countGroup(tx, m.Group, "pushed", 1, now); err != nil {
				return err
			}
		}
		if err := d.checkDepth(tx, added); err != nil {
			return err
		}
		return d.sweepOnPush(tx, added)
	})
	if err != nil {
		return nil, err
	}
	d.note.broadcast()
	return out, nil
}

// visibleAtPush is the visible_at of a message pushed without a delay: 0,
// which SQLite stores in the record header alone, where a timestamp takes
// 8 bytes in the row and 8 more in jobq_messages_order. Such a message is
// visible since it was pushed (enqueued_at), and 0 <= now keeps every
// "visible_at <= now" test true for it, in older builds too.
const visibleAtPush int64 = 0

// nonNil makes an empty body an empty BLOB rather than NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
