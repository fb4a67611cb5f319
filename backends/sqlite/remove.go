package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jobq/jobq/driver"
)

// removeTask deletes the queue's message with the given task ID if it is
// ready or delayed: not leased, or leased with the lease expired
// (claimable again; its old holder's settlement then finds it gone and
// gets LockLost). In-flight messages and dead letters stay.
const removeTask = `DELETE FROM jobq_messages
	WHERE id = (SELECT message_id FROM jobq_task_keys WHERE queue = ?1 AND task_id = ?2)
		AND queue = ?1 AND task_id = ?2 AND task_id <> ''
		AND (lease IS NULL OR visible_at <= ?3)`

// heldTask finds the queue's message with the given task ID that
// removeTask left: one in flight.
const heldTask = `SELECT 1 FROM jobq_messages
	WHERE id = (SELECT message_id FROM jobq_task_keys WHERE queue = ?1 AND task_id = ?2)
		AND queue = ?1 AND task_id = ?2 AND task_id <> ''`

var _ driver.TaskRemover = (*Driver)(nil)

// RemoveTasks implements driver.TaskRemover: the messages are deleted and
// the records of the tasks removed stored in one transaction; the tasks
// in flight are reported held.
func (d *Driver) RemoveTasks(ctx context.Context, recs []*driver.ResultRecord) (removed, held []string, err error) {
	byID := make(map[string]*driver.ResultRecord, len(recs))
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		if err := driver.CheckResultRecord(r); err != nil {
			return nil, nil, err
		}
		if byID[r.ID] == nil {
			ids = append(ids, r.ID)
		}
		byID[r.ID] = r
	}
	if len(ids) == 0 {
		return nil, nil, d.check(ctx)
	}
	err = d.writeTx(ctx, "remove tasks", func(tx wtx) error {
		removed, held = removed[:0], held[:0]
		now := micros(time.Now())
		for _, id := range ids {
			key := taskKey(id)
			res, err := tx.Exec(removeTask, d.cfg.queue, key, now)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 {
				var one int
				switch err := tx.QueryRow(heldTask, d.cfg.queue, key).Scan(&one); {
				case err == nil:
					held = append(held, id)
				case !errors.Is(err, sql.ErrNoRows):
					return err
				}
				continue
			}
			removed = append(removed, id)
			if err := d.putResult(tx, byID[id], now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(removed) > 0 {
		d.note.results.broadcast()
	}
	return removed, held, nil
}
