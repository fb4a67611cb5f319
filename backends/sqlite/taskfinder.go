package sqlite

import (
	"context"
	"strings"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/livetasks"
)

var (
	_ driver.TaskFinder      = (*Driver)(nil)
	_ driver.TaskGroupFinder = (*Driver)(nil)
)

// findTasksChunk bounds the task IDs one FindTasks query binds (SQLite
// allows 32,766 parameters; a shorter list plans and runs as well).
const findTasksChunk = 500

// findTasksQuery selects which of n task keys (parameters 2 to n+1) are
// those of live messages of queue ?1, with their groups (empty for none),
// through the task keys that dedup pushes (a canonical ID is kept as its
// 16 bytes: taskKey).
func findTasksQuery(n int) string {
	return `SELECT k.task_id, coalesce(m.grp, '') FROM jobq_task_keys k JOIN jobq_messages m ON m.id = k.message_id
	WHERE k.queue = ? AND k.task_id IN (?` + strings.Repeat(", ?", n-1) + `)`
}

// FindTasks implements driver.TaskFinder: one read of the task keys per
// findTasksChunk IDs.
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

// findLive calls found with the ID and group of each of ids that is the
// task ID of a live message, once per ID.
func (d *Driver) findLive(ctx context.Context, ids []string, found func(id, grp string)) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	for start := 0; start < len(ids); start += findTasksChunk {
		if err := d.findTasks(ctx, ids[start:min(start+findTasksChunk, len(ids))], found); err != nil {
			return d.wrap(ctx, "find tasks", err)
		}
	}
	return nil
}

// findTasks is findLive of at most findTasksChunk IDs.
func (d *Driver) findTasks(ctx context.Context, ids []string, found func(id, grp string)) error {
	byKey := make(map[string]string, len(ids))
	args := make([]any, 0, len(ids)+1)
	args = append(args, d.cfg.queue)
	for _, id := range ids {
		k := taskKey(id)
		args = append(args, k)
		byKey[keyString(k)] = id
	}
	rows, err := d.db.QueryContext(ctx, findTasksQuery(len(ids)), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k any
		var grp string
		if err := rows.Scan(&k, &grp); err != nil {
			return err
		}
		if id, ok := byKey[keyString(k)]; ok {
			delete(byKey, keyString(k))
			found(id, grp)
		}
	}
	return rows.Err()
}

// keyString is a task_id value (text, or the 16 bytes of a canonical ID)
// as a map key.
func keyString(k any) string {
	switch v := k.(type) {
	case []byte:
		return "b:" + string(v)
	case string:
		return "s:" + v
	}
	return ""
}
