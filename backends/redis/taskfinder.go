package redis

import (
	"context"

	"github.com/jobq/jobq/driver"
)

var _ driver.TaskFinder = (*Driver)(nil)

// FindTasks implements driver.TaskFinder: one HMGET of the ids hash that
// dedups queued tasks (it names every live message, ready, delayed or in
// flight, by task ID).
func (d *Driver) FindTasks(ctx context.Context, ids []string) ([]string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	vals, err := d.client.HMGet(ctx, d.prefix+"ids", ids...).Result()
	if err != nil {
		return nil, d.fail("find tasks", err)
	}
	return foundIDs(ids, vals), nil
}

// foundIDs returns the ids whose value in vals (HMGET's reply, in the
// same order) is set, each once.
func foundIDs(ids []string, vals []any) []string {
	seen := make(map[string]bool, len(ids))
	var out []string
	for i, v := range vals {
		if v != nil && !seen[ids[i]] {
			seen[ids[i]] = true
			out = append(out, ids[i])
		}
	}
	return out
}
