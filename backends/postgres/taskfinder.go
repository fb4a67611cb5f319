package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/livetasks"
)

var (
	_ driver.TaskFinder      = (*Driver)(nil)
	_ driver.TaskGroupFinder = (*Driver)(nil)
)

// findTasksSQL selects the task keys among $2 of the live messages of
// queue $1, with their groups (messages_task_key, the index that dedups
// pushes).
const findTasksSQL = `SELECT task_key, coalesce(grp, '') FROM {{s}}.messages WHERE queue = $1 AND task_key = ANY($2::bytea[])`

// FindTasks implements driver.TaskFinder: one read of the task-key index.
func (d *Driver) FindTasks(ctx context.Context, ids []string) ([]string, error) {
	return livetasks.IDs(d.lookup(ctx, ids))
}

// FindTaskGroups implements driver.TaskGroupFinder, as FindTasks reads.
func (d *Driver) FindTaskGroups(ctx context.Context, ids []string) (map[string]string, error) {
	return livetasks.Groups(d.lookup(ctx, ids))
}

// lookup is findLive of ids as a livetasks.Lookup.
func (d *Driver) lookup(ctx context.Context, ids []string) livetasks.Lookup {
	return func(found func(id, grp string)) error { return d.findLive(ctx, ids, found) }
}

// liveTask is a row of findTasksSQL.
type liveTask struct {
	key []byte
	grp string
}

// findLive calls found with the ID and group of each of ids that is the
// task ID of a live message, once per ID.
func (d *Driver) findLive(ctx context.Context, ids []string, found func(id, grp string)) error {
	if err := d.closing.Err(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	keys := taskKeys(ids)
	rows, err := d.pool.Query(ctx, d.hsql.find, d.cfg.queue, keys)
	if err != nil {
		return wrap(ctx, "find tasks", err)
	}
	live, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (t liveTask, err error) {
		return t, r.Scan(&t.key, &t.grp)
	})
	if err != nil {
		return wrap(ctx, "find tasks", err)
	}
	grp := make(map[string]string, len(live))
	for _, t := range live {
		grp[string(t.key)] = t.grp
	}
	for i, k := range keys {
		if g, ok := grp[string(k)]; ok {
			delete(grp, string(k))
			found(ids[i], g)
		}
	}
	return nil
}
