package servicebus

import (
	"context"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// PageQueued implements driver.Pager with PeekMessages from the sequence
// number after the cursor: messages in enqueue order, scheduled ones
// included, locked (in-flight) ones left out. A page that peeks nothing is
// the last.
func (d *Driver) PageQueued(ctx context.Context, after string, max int) ([]*driver.PeekedMessage, string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, "", err
	}
	msgs, next, err := d.peekFrom(ctx, d.recv, after, max)
	if err != nil {
		return nil, "", d.fail("page queued messages", err)
	}
	now := time.Now()
	out := make([]*driver.PeekedMessage, 0, len(msgs))
	for _, m := range msgs {
		p := d.peeked(m, now)
		if !p.InFlight {
			out = append(out, p)
		}
	}
	return out, next, nil
}

// PageDead implements driver.Pager over the $DeadLetterQueue sub-queue.
func (d *Driver) PageDead(ctx context.Context, after string, max int) ([]*driver.DeadMessage, string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, "", err
	}
	msgs, next, err := d.peekFrom(ctx, d.dead, after, max)
	if err != nil {
		return nil, "", d.fail("page dead letters", err)
	}
	out := make([]*driver.DeadMessage, len(msgs))
	for i, m := range msgs {
		out[i] = d.deadMessage(m)
	}
	return out, next, nil
}

// peekFrom peeks up to max messages of r from the sequence number after the
// cursor after, and returns the next page's cursor ("" when none came).
func (d *Driver) peekFrom(ctx context.Context, r *azservicebus.Receiver, after string, max int) ([]*azservicebus.ReceivedMessage, string, error) {
	var from int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			return nil, "", driver.Errorf(errcode.InvalidArgument, "servicebus: page cursor %q is not one this driver returned", after)
		}
		from = n + 1
	}
	if max < 1 {
		return nil, "", nil
	}
	msgs, err := r.PeekMessages(ctx, min(max, peekPage), &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
	if err != nil || len(msgs) == 0 {
		return nil, "", err
	}
	last := from
	for _, m := range msgs {
		if m.SequenceNumber != nil && *m.SequenceNumber >= last {
			last = *m.SequenceNumber
		}
	}
	return msgs, strconv.FormatInt(last, 10), nil
}
