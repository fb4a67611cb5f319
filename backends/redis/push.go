package redis

import (
	"context"
	"strconv"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bodypack"
	"github.com/jobq/jobq/internal/pushgroup"
)

// Push implements driver.Driver. A push of one message goes through the
// driver's push group (internal/pushgroup): concurrent ones of this handle
// share a script call. Larger pushes go to Redis in chunks of chunkSize, one
// script call per chunk, all chunks pipelined in one round trip. On error it
// returns the results of the messages before the first chunk that failed, as
// the contract asks.
func (d *Driver) Push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if len(msgs) == 1 {
		res, err := d.pushes.Push(ctx, msgs[0])
		if err != nil {
			return nil, err
		}
		return []driver.PushResult{res}, nil
	}
	return d.pushNow(ctx, msgs)
}

// newPushGroup returns the group that one-message pushes go through:
// up to eight go out at once, each alone; more wait, and go together in the
// next script call, up to 64 in one, made by the goroutine whose lone push
// returned (it wakes the waiting callers once, with their outcomes). Lone
// calls beat fewer calls sharing the work: a call that carries several
// pushes leaves the client and Redis waiting on each other more often, and
// on a virtual machine each wake-up costs more than the call it saves
// (docs/performance.md). Past eight concurrent pushes, Redis is the
// bottleneck, calls take longer and more pushes share each.
func newPushGroup(push pushgroup.PushFunc) *pushgroup.Group {
	return pushgroup.New(push, pushgroup.Options{MaxBatch: 64, MaxInFlight: pushFlight})
}

// pushFlight is how many one-message push calls go out at once, each alone
// (newPushGroup).
const pushFlight = 8

// pushNow sends msgs at once: the batch push behind Push and the push group.
func (d *Driver) pushNow(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	bounds := chunkBounds(len(msgs))
	chunks := make([][]any, len(bounds))
	now := d.now().UnixMilli()
	for c, b := range bounds {
		part := msgs[b[0]:b[1]]
		grouped := anyGrouped(part)
		traced := grouped || anyTraced(part) // a group's field comes after the trace's
		packed := packAll(part)
		args := d.scriptArgs(1 + 7*len(part))
		args = append(args, pushTime(now, packed != nil, traced, grouped))
		for i, m := range part {
			body := m.Body
			if packed != nil {
				body = packed[i]
			}
			// A grouped call's last message keeps every field: its group
			// comes last.
			args = appendPushFields(args, m, body, i == len(part)-1 && !grouped, traced)
			if grouped {
				args = append(args, m.Group)
			}
		}
		chunks[c] = args
	}
	out := make([]driver.PushResult, len(msgs))
	for c, cmd := range d.runChunks(ctx, pushScript, chunks, nil) {
		if mid, ok := cmd.Val().(int64); ok {
			// A lone new message's id (pushScript).
			out[bounds[c][0]] = driver.PushResult{MessageID: strconv.FormatInt(mid, 10)}
			continue
		}
		res, err := cmd.Slice()
		if err == nil && len(res) != 2*(bounds[c][1]-bounds[c][0]) {
			err = driver.Errorf(errcode.Internal, "push script returned %d values for %d messages", len(res), bounds[c][1]-bounds[c][0])
		}
		if err != nil {
			// Report the stored prefix. Later chunks may have been stored
			// too; pushing them again is safe, as their IDs dedup.
			if qf := queueFull(err); qf != nil {
				return out[:bounds[c][0]], qf
			}
			return out[:bounds[c][0]], d.fail(ctx, "push", err)
		}
		for j := 0; j < len(res); j += 2 {
			out[bounds[c][0]+j/2] = driver.PushResult{MessageID: asStr(res[j]), Duplicate: asInt(res[j+1]) == 1}
		}
	}
	return out, nil
}

// pushTime is the push script's time argument: now, flagged "z" when the
// bodies are packed, "t" when the call carries trace contexts and "g"
// (with "t") when it carries groups.
func pushTime(now int64, packed, traced, grouped bool) any {
	flags := ""
	if packed {
		flags += "z"
	}
	if traced || grouped {
		flags += "t"
	}
	if grouped {
		flags += "g"
	}
	if flags == "" {
		return now
	}
	return flagged(flags, now)
}

// flagged returns the push script's first argument: flags, then now in
// decimal.
func flagged(flags string, now int64) string {
	var b [24]byte
	return string(strconv.AppendInt(append(b[:0], flags...), now, 10))
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

// packAll returns the packed bodies of msgs (body.go), or nil when one of
// them does not pack: a push script call stores all its bodies one way.
func packAll(msgs []*driver.Message) [][]byte {
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		p, ok := bodypack.Pack(m.Body, m.ID)
		if !ok {
			return nil
		}
		out[i] = p
	}
	return out
}

// appendPushFields appends a message's fields, with body as its body, for
// the push script. The last
// message of a call leaves out its trailing fields that hold their defaults
// (priority 0, no not-before, no concurrency or rate-limit key), which the
// script fills in: Redis charges a script for every argument, and most
// pushes set none of these.
func appendPushFields(args []any, m *driver.Message, body []byte, last, traced bool) []any {
	var nb int64
	if !m.NotBefore.IsZero() {
		nb = m.NotBefore.UnixMilli()
	}
	f := [...]any{m.ID, body, m.Priority, nb, m.ConcurrencyKey, m.RateLimitKey, m.TraceParent}
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
