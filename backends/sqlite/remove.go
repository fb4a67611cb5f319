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
		AND (lease IS NULL OR visible_at <= ?3)
	RETURNING grp`

// heldTask finds the queue's message with the given task ID that
// removeTask left: one in flight.
const heldTask = `SELECT 1 FROM jobq_messages
	WHERE id = (SELECT message_id FROM jobq_task_keys WHERE queue = ?1 AND task_id = ?2)
		AND queue = ?1 AND task_id = ?2 AND task_id <> ''`

var _ driver.TaskRemover = (*Driver)(nil)

// RemoveTasks implements driver.TaskRemover: in one transaction the
// messages are deleted and the records of the tasks removed stored, and
// the cancel requests of the tasks in flight (held) stored under
// putResult's rule.
func (d *Driver) RemoveTasks(ctx context.Context, cancelled, requested []*driver.ResultRecord) (removed, held []string, err error) {
	if err := driver.CheckRemoveRecords(cancelled, requested); err != nil {
		return nil, nil, err
	}
	byID := make(map[string]int, len(cancelled))
	ids := make([]string, 0, len(cancelled))
	for i, r := range cancelled {
		if _, ok := byID[r.ID]; !ok {
			ids = append(ids, r.ID)
		}
		byID[r.ID] = i
	}
	if len(ids) == 0 {
		return nil, nil, d.closing.Check(ctx)
	}
	err = d.writeTx(ctx, "remove tasks", func(tx wtx) error {
		removed, held = removed[:0], held[:0]
		now := micros(time.Now())
		for _, id := range ids {
			key := taskKey(id)
			var grp string
			err := tx.QueryRow(removeTask, d.cfg.queue, key, now).Scan(&grp)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if err == nil {
				removed = append(removed, id)
				if err := d.countGroup(tx, grp, "cancelled", 1, now); err != nil {
					return err
				}
				if err := d.putResult(tx, cancelled[byID[id]], now); err != nil {
					return err
				}
				continue
			}
			var one int
			switch err := tx.QueryRow(heldTask, d.cfg.queue, key).Scan(&one); {
			case errors.Is(err, sql.ErrNoRows):
				continue
			case err != nil:
				return err
			}
			held = append(held, id)
			if requested != nil {
				if err := d.putResult(tx, requested[byID[id]], now); err != nil {
					return err
				}
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
