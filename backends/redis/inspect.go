package redis

import (
	"context"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Peek implements driver.Driver: ready messages in claim order, then
// delayed ones by due time, then leased ones by lease expiry.
func (d *Driver) Peek(ctx context.Context, max int) ([]*driver.PeekedMessage, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	res, err := d.run(ctx, peekScript, max).Slice()
	if err != nil {
		return nil, d.fail(ctx, "peek", err)
	}
	return peekedRows(res, true), nil
}

// peekedRows decodes the rows peekScript and pageQueuedScript return:
// per message its id, task id, body (field b), delivery count, enqueued ms,
// visible ms and priority; then, when inFlight is set (peekScript), 1 for a
// leased message; last the packed body (field z, only when there is no b).
func peekedRows(res []any, inFlight bool) []*driver.PeekedMessage {
	width := 8
	if inFlight {
		width = 9
	}
	out := make([]*driver.PeekedMessage, 0, len(res)/width)
	for i := 0; i+width-1 < len(res); i += width {
		id := asStr(res[i+1])
		out = append(out, &driver.PeekedMessage{
			MessageID:     asStr(res[i]),
			ID:            id,
			Body:          storedBody(res[i+2], res[i+width-1], id),
			DeliveryCount: int(asInt(res[i+3])),
			EnqueuedAt:    fromMs(asInt(res[i+4])),
			VisibleAt:     fromMs(asInt(res[i+5])),
			Priority:      int(asInt(res[i+6])),
			InFlight:      inFlight && asInt(res[i+7]) == 1,
		})
	}
	return out
}

// deadRows decodes the rows listDeadScript and pageDeadScript return, eight
// fields per letter: id, task id, body (field b), reason, detail, delivery
// count, dead-at ms, packed body (field z, only when there is no b).
func deadRows(res []any) []*driver.DeadMessage {
	out := make([]*driver.DeadMessage, 0, len(res)/8)
	for i := 0; i+7 < len(res); i += 8 {
		id := asStr(res[i+1])
		out = append(out, &driver.DeadMessage{
			MessageID:     asStr(res[i]),
			ID:            id,
			Body:          storedBody(res[i+2], res[i+7], id),
			Reason:        asStr(res[i+3]),
			Detail:        asStr(res[i+4]),
			DeliveryCount: int(asInt(res[i+5])),
			DeadAt:        fromMs(asInt(res[i+6])),
		})
	}
	return out
}

// Stats implements driver.Driver. The counts are exact and read in one
// script; due delayed messages and expired leases count as ready.
func (d *Driver) Stats(ctx context.Context) (driver.Stats, error) {
	if err := d.closing.Check(ctx); err != nil {
		return driver.Stats{}, err
	}
	res, err := d.run(ctx, statsScript).Int64Slice()
	if err != nil {
		return driver.Stats{}, d.fail(ctx, "stats", err)
	}
	if len(res) != 4 {
		return driver.Stats{}, driver.Errorf(errcode.Internal, "redis stats on queue %s: script returned %d counts", d.queue, len(res))
	}
	return driver.Stats{
		Ready: res[0], InFlight: res[1], Delayed: res[2], Dead: res[3],
		Known: driver.KnownCounts{Ready: true, InFlight: true, Delayed: true, Dead: true},
	}, nil
}

// clearBatch is how many messages one clear or dead-letter script call
// handles before it lets other clients run.
const clearBatch = 1000

// Clear implements driver.Driver. It deletes ready, delayed and leased
// messages, clearBatch per script call, until a call finds fewer than that.
func (d *Driver) Clear(ctx context.Context) (int64, error) {
	return d.repeat(ctx, "clear", func() (int64, error) {
		return d.run(ctx, clearScript, clearBatch).Int64()
	})
}

// ListDead implements driver.Driver.
func (d *Driver) ListDead(ctx context.Context, max int) ([]*driver.DeadMessage, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	res, err := d.run(ctx, listDeadScript, max).Slice()
	if err != nil {
		return nil, d.fail(ctx, "list dead letters", err)
	}
	return deadRows(res), nil
}

// RequeueDead implements driver.Driver. Requeued messages keep their
// delivery count, so that the next delivery counts on (requeueDeadScript).
func (d *Driver) RequeueDead(ctx context.Context, ids []string) (int64, error) {
	return d.deadOp(ctx, "requeue dead letters", ids, func(args []any) (int64, error) {
		return d.run(ctx, requeueDeadScript, append([]any{clearBatch}, args...)...).Int64()
	})
}

// PurgeDead implements driver.Driver.
func (d *Driver) PurgeDead(ctx context.Context, ids []string) (int64, error) {
	return d.deadOp(ctx, "purge dead letters", ids, func(args []any) (int64, error) {
		return d.run(ctx, purgeDeadScript, append([]any{clearBatch}, args...)...).Int64()
	})
}

// deadOp runs a dead-letter script over the named ids in chunks, or over
// all dead letters (ids nil) until none are left.
func (d *Driver) deadOp(ctx context.Context, op string, ids []string, call func(args []any) (int64, error)) (int64, error) {
	if ids == nil {
		return d.repeat(ctx, op, func() (int64, error) { return call(nil) })
	}
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	var total int64
	for _, b := range chunkBounds(len(ids)) {
		args := make([]any, 0, b[1]-b[0])
		for _, id := range ids[b[0]:b[1]] {
			args = append(args, id)
		}
		n, err := call(args)
		total += n
		if err != nil {
			return total, d.fail(ctx, op, err)
		}
	}
	return total, nil
}

// repeat calls step until it handles fewer than clearBatch messages, and
// returns the total.
func (d *Driver) repeat(ctx context.Context, op string, step func() (int64, error)) (int64, error) {
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	var total int64
	for {
		n, err := step()
		total += n
		if err != nil {
			return total, d.fail(ctx, op, err)
		}
		if n < clearBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, d.fail(ctx, op, err)
		}
	}
}
