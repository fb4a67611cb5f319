package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jobq/jobq/driver"
)

// removeTasks deletes the queue's messages with the given task IDs that
// are ready or delayed: not leased, or leased with the lease expired
// (claimable again; its old holder's settlement then finds it gone and
// gets LockLost). In-flight messages and dead letters stay.
const removeTasks = `DELETE FROM jobq_messages
	WHERE queue = ?1 AND task_id IN (SELECT value FROM json_each(?2)) AND task_id <> ''
		AND (lease IS NULL OR visible_at <= ?3)
	RETURNING CAST(task_id AS TEXT)`

var _ driver.TaskRemover = (*Driver)(nil)

// RemoveTasks implements driver.TaskRemover, in one transaction.
func (d *Driver) RemoveTasks(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, d.check(ctx)
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "sqlite remove tasks: task IDs: %w", err)
	}
	var removed []string
	err = d.writeTx(ctx, "remove tasks", func(tx wtx) error {
		removed = removed[:0]
		rows, err := tx.Query(removeTasks, d.cfg.queue, string(list), micros(time.Now()))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			removed = append(removed, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return removed, nil
}
