package redis

import (
	"context"
	"strconv"
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
		traced := anyTraced(msgs[b[0]:b[1]])
		args := make([]any, 0, 1+7*(b[1]-b[0]))
		if traced {
			args = append(args, "t"+strconv.FormatInt(now, 10))
		} else {
			args = append(args, now)
		}
		for i := b[0]; i < b[1]; i++ {
			args = appendPushFields(args, msgs[i], i == b[1]-1, traced)
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

// anyTraced reports whether a message of msgs carries a trace context: the
// push script's call then takes a seventh field per message.
func anyTraced(msgs []*driver.Message) bool {
	for _, m := range msgs {
		if m.TraceParent != "" {
			return true
		}
	}
	return false
}

// appendPushFields appends a message's fields for the push script. The last
// message of a call leaves out its trailing fields that hold their defaults
// (priority 0, no not-before, no concurrency or rate-limit key), which the
// script fills in: Redis charges a script for every argument, and most
// pushes set none of these.
func appendPushFields(args []any, m *driver.Message, last, traced bool) []any {
	var nb int64
	if !m.NotBefore.IsZero() {
		nb = m.NotBefore.UnixMilli()
	}
	f := [...]any{m.ID, m.Body, m.Priority, nb, m.ConcurrencyKey, m.RateLimitKey, m.TraceParent}
	n := len(f) - 1
	if traced {
		n = len(f)
	}
	if last {
		switch {
		case traced && m.TraceParent != "":
		case m.RateLimitKey != "":
			n = 6
		case m.ConcurrencyKey != "":
			n = 5
		case nb != 0:
			n = 4
		case m.Priority != 0:
			n = 3
		default:
			n = 2
		}
	}
	return append(args, f[:n]...)
}
