package sqlite

import (
	"context"
	"database/sql"
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
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "sqlite remove tasks: task IDs: %w", err)
	}
	var removed []string
	err = d.writeTx(ctx, "remove tasks", func(tx wtx) error {
		removed = removed[:0]
		now := micros(time.Now())
		rows, err := tx.Query(removeTasks, d.cfg.queue, string(list), now)
		if err != nil {
			return err
		}
		if removed, err = distinctIDs(rows, removed); err != nil {
			return err
		}
		for _, id := range removed {
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

// distinctIDs appends to ids the task IDs rows return, each once, and
// closes rows.
func distinctIDs(rows *sql.Rows, ids []string) ([]string, error) {
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return ids, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}
