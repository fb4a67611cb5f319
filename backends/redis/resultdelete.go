package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
)

var _ driver.ResultDeleter = (*Driver)(nil)

// deleteResultsScript deletes the records of task ids from every record
// bucket (a task rewritten since it was first recorded has a copy in an
// older one). ARGV: prefix, then task ids. Returns how many of the ids
// had a record.
var deleteResultsScript = goredis.NewScript(common + `
local buckets = redis.call('ZRANGEBYSCORE', P .. 'rbs', now_ms(), '+inf')
local n = 0
for i = 2, #ARGV do
  local hit = 0
  for _, b in ipairs(buckets) do
    hit = hit + redis.call('HDEL', P .. 'rb:' .. b, ARGV[i])
  end
  if hit > 0 then n = n + 1 end
end
return n
`)

// DeleteResults implements driver.ResultDeleter: one script per chunk of
// IDs.
func (d *Driver) DeleteResults(ctx context.Context, ids []string) (int64, error) {
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	var total int64
	for _, b := range chunkBounds(len(ids)) {
		chunk := ids[b[0]:b[1]]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		n, err := d.run(ctx, deleteResultsScript, args...).Int64()
		if err != nil {
			return total, d.fail(ctx, "delete results", err)
		}
		total += n
	}
	return total, nil
}
