package redis

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
)

// Push implements driver.Driver. Messages go to Redis in chunks of
// chunkSize, one script call per chunk, all chunks pipelined in one round
// trip. On error it returns the results of the messages before the first
// chunk that failed, as the contract asks.
func (d *Driver) Push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	if err := d.begin(ctx, "push"); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	bounds := chunkBounds(len(msgs))
	chunks := make([][]any, len(bounds))
	now := time.Now().UnixMilli()
	for c, b := range bounds {
		args := make([]any, 0, 3+6*(b[1]-b[0]))
		args = append(args, d.channel, b[1]-b[0], now)
		for _, m := range msgs[b[0]:b[1]] {
			var nb int64
			if !m.NotBefore.IsZero() {
				nb = m.NotBefore.UnixMilli()
			}
			args = append(args, m.ID, m.Body, m.Priority, nb, m.ConcurrencyKey, m.RateLimitKey)
		}
		chunks[c] = args
	}
	out := make([]driver.PushResult, len(msgs))
	for c, cmd := range d.runChunks(ctx, pushScript, chunks) {
		res, err := cmd.Slice()
		if err == nil && len(res) != 2*(bounds[c][1]-bounds[c][0]) {
			err = driver.Errorf(driver.Internal, "push script returned %d values for %d messages", len(res), bounds[c][1]-bounds[c][0])
		}
		if err != nil {
			// Report the stored prefix. Later chunks may have been stored
			// too; pushing them again is safe, as their IDs dedup.
			if qf := queueFull(err); qf != nil {
				return out[:bounds[c][0]], qf
			}
			return out[:bounds[c][0]], d.fail("push", err)
		}
		for j := 0; j < len(res); j += 2 {
			out[bounds[c][0]+j/2] = driver.PushResult{MessageID: asStr(res[j]), Duplicate: asInt(res[j+1]) == 1}
		}
	}
	return out, nil
}
