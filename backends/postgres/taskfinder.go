package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

var _ driver.TaskFinder = (*Driver)(nil)

// findTasksSQL selects the task keys among $2 of the live messages of
// queue $1 (messages_task_key, the index that dedups pushes).
const findTasksSQL = `SELECT task_key FROM {{s}}.messages WHERE queue = $1 AND task_key = ANY($2::bytea[])`

// FindTasks implements driver.TaskFinder: one read of the task-key index.
func (d *Driver) FindTasks(ctx context.Context, ids []string) ([]string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	keys := taskKeys(ids)
	rows, err := d.pool.Query(ctx, d.hsql.find, d.cfg.queue, keys)
	if err != nil {
		return nil, wrap(ctx, "find tasks", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, wrap(ctx, "find tasks", err)
	}
	live := make(map[string]bool, len(found))
	for _, k := range found {
		live[string(k)] = true
	}
	var out []string
	for i, k := range keys {
		if live[string(k)] {
			delete(live, string(k))
			out = append(out, ids[i])
		}
	}
	return out, nil
}
