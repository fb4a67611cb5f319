package sqlite

import (
	"context"
	"strings"

	"github.com/jobq/jobq/driver"
)

var _ driver.TaskFinder = (*Driver)(nil)

// findTasksChunk bounds the task IDs one FindTasks query binds (SQLite
// allows 32,766 parameters; a shorter list plans and runs as well).
const findTasksChunk = 500

// findTasksQuery selects which of n task keys (parameters 2 to n+1) are
// those of live messages of queue ?1, through the task keys that dedup
// pushes (a canonical ID is kept as its 16 bytes: taskKey).
func findTasksQuery(n int) string {
	return `SELECT k.task_id FROM jobq_task_keys k JOIN jobq_messages m ON m.id = k.message_id
	WHERE k.queue = ? AND k.task_id IN (?` + strings.Repeat(", ?", n-1) + `)`
}

// FindTasks implements driver.TaskFinder: one read of the task keys per
// findTasksChunk IDs.
func (d *Driver) FindTasks(ctx context.Context, ids []string) ([]string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	var out []string
	for start := 0; start < len(ids); start += findTasksChunk {
		chunk := ids[start:min(start+findTasksChunk, len(ids))]
		found, err := d.findTasks(ctx, chunk)
		if err != nil {
			return nil, d.wrap(ctx, "find tasks", err)
		}
		out = append(out, found...)
	}
	return out, nil
}

// findTasks is FindTasks of at most findTasksChunk IDs.
func (d *Driver) findTasks(ctx context.Context, ids []string) ([]string, error) {
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
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k any
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		if id, ok := byKey[keyString(k)]; ok {
			delete(byKey, keyString(k))
			out = append(out, id)
		}
	}
	return out, rows.Err()
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
