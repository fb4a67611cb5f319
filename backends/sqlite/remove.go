package sqlite

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
)

// removeTasks deletes the queue's messages with the given task IDs that
// are ready or delayed: not leased, or leased with the lease expired
// (claimable again; its old holder's settlement then finds it gone and
// gets LockLost). In-flight messages and dead letters stay.
const removeTask = `DELETE FROM jobq_messages
	WHERE queue = ?1 AND task_id = ?2 AND task_id <> ''
		AND (lease IS NULL OR visible_at <= ?3)`

var _ driver.TaskRemover = (*Driver)(nil)

// RemoveTasks implements driver.TaskRemover, in one transaction.
func (d *Driver) RemoveTasks(ctx context.Context, ids []string) ([]string, error) {
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
			if n > 0 {
				removed = append(removed, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return removed, nil
}
