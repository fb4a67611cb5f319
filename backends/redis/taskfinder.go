package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

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
		return nil, d.fail(ctx, "find tasks", err)
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

var _ driver.TaskGroupFinder = (*Driver)(nil)

// findGroupsScript returns, for each task ID in ARGV[2..] that a live
// message holds, the ID and the message's group (empty for none), in one
// atomic read.
var findGroupsScript = goredis.NewScript(common + `
local out = {}
for i = 2, #ARGV do
  local mid = redis.call('HGET', P .. 'ids', ARGV[i])
  if mid then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = redis.call('HGET', mkey(mid), 'g') or ''
  end
end
return out`)

// FindTaskGroups implements driver.TaskGroupFinder: one script.
func (d *Driver) FindTaskGroups(ctx context.Context, ids []string) (map[string]string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	args := d.scriptArgs(len(ids))
	for _, id := range ids {
		args = append(args, id)
	}
	pairs, err := d.runArgs(ctx, findGroupsScript, args).StringSlice()
	if err != nil {
		return nil, d.fail(ctx, "find the groups of tasks", err)
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			out[pairs[i]] = pairs[i+1]
		}
	}
	return out, nil
}
