package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"sync"
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
		var maxDepth sql.NullInt64
		var held bool
		if err := tx.QueryRow(pushChecks, d.cfg.queue).Scan(&maxDepth, &held); err != nil {
			return err
		}
		todo, at := msgs, []int(nil)
		if held {
			var err error
			if todo, at, err = d.notHeld(tx, msgs, out); err != nil {
				return err
			}
		}
		into := out
		if at != nil {
			into = make([]driver.PushResult, len(todo))
		}
		added := 0
		for lo := 0; lo < len(todo); {
			n := insertRows(len(todo) - lo)
			k, err := d.insertChunk(tx, todo[lo:lo+n], into[lo:lo+n], now)
			if err != nil {
				return err
			}
			added += k
			lo += n
		}
		for j, i := range at {
			out[i] = into[j]
		}
		if err := d.checkDepth(tx, added, maxDepth); err != nil {
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

// insertChunk stores msgs with one insertMessages statement, filling out,
// and returns how many it added (the others were duplicates).
func (d *Driver) insertChunk(tx wtx, msgs []*driver.Message, out []driver.PushResult, now int64) (int, error) {
	args := make([]any, 0, insertColumns*len(msgs))
	keys := make([]any, len(msgs))
	for i, m := range msgs {
		visible := visibleAtPush
		if !m.NotBefore.IsZero() && micros(m.NotBefore) > now {
			visible = micros(m.NotBefore)
		}
		st := storeTask(m.ID, m.Body)
		keys[i] = st.key
		args = append(args, d.cfg.queue, st.key, st.body, st.idAt, m.Priority, visible, now, m.ConcurrencyKey, m.RateLimitKey, m.TraceParent, m.Group)
	}
	ids, err := insertedIDs(tx, insertMessages(len(msgs)), args)
	if err != nil {
		return 0, err
	}
	added := 0
	for i, m := range msgs {
		k := keyString(keys[i])
		if q := ids[k]; len(q) > 0 {
			ids[k] = q[1:]
			out[i] = driver.PushResult{MessageID: strconv.FormatInt(q[0], 10)}
			added++
			if err := d.countGroup(tx, m.Group, "pushed", 1, now); err != nil {
				return 0, err
			}
			continue
		}
		// A message with this task ID is queued already (or was added
		// earlier in this batch).
		var id int64
		if err := tx.QueryRow(keyMessage, d.cfg.queue, keys[i]).Scan(&id); err != nil {
			return 0, err
		}
		out[i] = driver.PushResult{MessageID: strconv.FormatInt(id, 10), Duplicate: true}
	}
	return added, nil
}

// insertedIDs runs an insertMessages statement and returns the message IDs
// it added by keyString of their task_id, each key's in push order (the
// IDs grow in push order; RETURNING's own order is unspecified). Only an
// ID that dedup leaves alone (the empty one) can be added twice.
func insertedIDs(tx wtx, query string, args []any) (map[string][]int64, error) {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := map[string][]int64{}
	for rows.Next() {
		var id int64
		var key any
		if err := rows.Scan(&id, &key); err != nil {
			return nil, err
		}
		k := keyString(key)
		ids[k] = append(ids[k], id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, q := range ids {
		slices.Sort(q)
	}
	return ids, nil
}

// insertColumns is the parameters insertMessages takes per message.
const insertColumns = 11

// maxInsertRows is the most messages one insertMessages statement stores.
const maxInsertRows = 64

// insertRows is how many of n messages the next statement stores: the
// largest power of two up to maxInsertRows, so that a driver prepares at
// most seven insert statements whatever its batch sizes.
func insertRows(n int) int {
	r := 1
	for r*2 <= min(n, maxInsertRows) {
		r *= 2
	}
	return r
}

// insertMessagesSQL holds insertMessages' statements by row count.
var insertMessagesSQL sync.Map // int -> string

// insertMessages is insertMessage (with the group) for n messages, each
// with insertColumns parameters (the queue first). A message whose task ID
// is queued already is skipped by the dedup trigger, as by insertMessage;
// one statement per message was most of a push's CPU. The parameters are
// bare ?, as upsertResults' are.
func insertMessages(n int) string {
	if s, ok := insertMessagesSQL.Load(n); ok {
		return s.(string)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO jobq_messages (queue, task_id, body, id_at, priority, visible_at, enqueued_at, concurrency_key, rate_key, trace_parent, grp) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?" + strings.Repeat(", ?", insertColumns-1) + ")")
	}
	b.WriteString(" RETURNING id, task_id")
	s, _ := insertMessagesSQL.LoadOrStore(n, b.String())
	return s.(string)
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
