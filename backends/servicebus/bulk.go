package servicebus

import (
	"context"
	"math"
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

var _ driver.DeadSincer = (*Driver)(nil)

// DeadSince implements driver.DeadSincer. The dead-letter sub-queue is
// searched by sequence number, one letter per peek: a letter dead-lettered
// before since moves the lower bound up to its sequence number, a later one
// or none the upper bound down, first in doubling steps from the first
// letter, then by halves. A letter's time is its jobq-dead-at property, or
// its enqueued time. Azure keeps a message's sequence number and enqueued
// time when it dead-letters it, so letters in sequence order have
// ascending enqueued times, and jobq-dead-at is never earlier: every
// letter enqueued since lies after the cursor (one enqueued before and
// dead-lettered by jobq since may fall on either side).
func (d *Driver) DeadSince(ctx context.Context, since time.Time) (string, error) {
	if err := d.closing.Err(); err != nil {
		return "", err
	}
	// first returns the sequence number of the first letter at or after
	// seq, whether it was dead-lettered before since, and false when none.
	first := func(seq int64) (int64, bool, bool, error) {
		msgs, err := d.dead.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seq})
		if err != nil || len(msgs) == 0 || msgs[0].SequenceNumber == nil {
			return 0, false, false, err
		}
		return *msgs[0].SequenceNumber, d.deadMessage(msgs[0]).DeadAt.Before(since), true, nil
	}
	lo, old, ok, err := first(0)
	if err != nil {
		return "", d.fail("find recent dead letters", err)
	}
	if !ok || !old {
		return "", nil
	}
	// lo's letter is old; the first letter at or after hi is recent, or
	// there is none.
	hi, step := int64(-1), int64(1)
	for hi < 0 {
		probe := lo + step
		if probe < lo { // past the largest sequence number
			probe = math.MaxInt64
		}
		seq, old, ok, err := first(probe)
		switch {
		case err != nil:
			return "", d.fail("find recent dead letters", err)
		case ok && old && probe < math.MaxInt64:
			lo, step = seq, 2*step
		default:
			hi = probe
		}
	}
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		seq, old, ok, err := first(mid)
		switch {
		case err != nil:
			return "", d.fail("find recent dead letters", err)
		case ok && seq < hi && old:
			lo = seq
		default:
			hi = mid
		}
	}
	return strconv.FormatInt(lo, 10), nil
}
