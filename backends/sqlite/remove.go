package sqlite

import (
	"context"
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

var _ driver.TaskRemover = (*Driver)(nil)

// RemoveTasks implements driver.TaskRemover: the messages are deleted and
// the records of the tasks removed stored in one transaction.
func (d *Driver) RemoveTasks(ctx context.Context, recs []*driver.ResultRecord) ([]string, error) {
	byID := make(map[string]*driver.ResultRecord, len(recs))
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		if err := driver.CheckResultRecord(r); err != nil {
			return nil, err
		}
		if byID[r.ID] == nil {
			ids = append(ids, r.ID)
		}
		byID[r.ID] = r
	}
	if len(ids) == 0 {
		return nil, d.check(ctx)
	}
	var removed []string
	err := d.writeTx(ctx, "remove tasks", func(tx wtx) error {
		removed = removed[:0]
		now := micros(time.Now())
		for _, id := range ids {
			res, err := tx.Exec(removeTask, d.cfg.queue, taskKey(id), now)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 {
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
		return nil, err
	}
	if len(removed) > 0 {
		d.note.results.broadcast()
	}
	return removed, nil
}
