package servicebus

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// peekPage is how many messages one PeekMessages call asks for when paging.
const peekPage = 250

// Peek implements driver.Driver with PeekMessages (peekAll) from the first sequence
// number: messages in enqueue order, scheduled and locked ones included.
func (d *Driver) Peek(ctx context.Context, max int) ([]*driver.PeekedMessage, error) {
	const op = "peek"
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	msgs, err := d.peekAll(ctx, d.recv, max)
	if err != nil {
		return nil, d.fail(op, err)
	}
	now := time.Now()
	out := make([]*driver.PeekedMessage, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, d.peeked(m, now))
	}
	return out, nil
}

// peekAll peeks up to max messages of r from the first, a page at a time:
// Service Bus returns at most 250 messages per peek (one on a partitioned
// entity), however many are asked for.
func (d *Driver) peekAll(ctx context.Context, r *azservicebus.Receiver, max int) ([]*azservicebus.ReceivedMessage, error) {
	var out []*azservicebus.ReceivedMessage
	after := ""
	for len(out) < max {
		msgs, next, err := d.peekFrom(ctx, r, after, max-len(out))
		if err != nil || next == "" {
			return out, err
		}
		out = append(out, msgs...)
		after = next
	}
	return out, nil
}

// peeked turns a peeked message into the driver's form.
func (d *Driver) peeked(m *azservicebus.ReceivedMessage, now time.Time) *driver.PeekedMessage {
	p := &driver.PeekedMessage{
		MessageID: m.MessageID,
		ID:        taskID(m),
		Body:      m.Body,
		InFlight:  m.LockedUntil != nil && d.clock.local(*m.LockedUntil).After(now),
	}
	p.DeliveryCount = endedDeliveries(m)
	if p.InFlight {
		p.DeliveryCount++
	}
	if m.EnqueuedTime != nil {
		p.EnqueuedAt = d.clock.local(*m.EnqueuedTime)
		p.VisibleAt = p.EnqueuedAt
	}
	if m.State == azservicebus.MessageStateScheduled && m.ScheduledEnqueueTime != nil {
		p.VisibleAt = d.clock.local(*m.ScheduledEnqueueTime)
	}
	return p
}

// endedDeliveries is how many deliveries of a peeked message have ended
// (abandoned or expired): Service Bus's count, to which the SDK adds one as
// if the peek were a delivery. The deliveries of the message a copy
// replaced are added.
func endedDeliveries(m *azservicebus.ReceivedMessage) int {
	return max(int(m.DeliveryCount)-1, 0) + intProp(m, PropPriorDeliveries)
}

// Stats implements driver.Driver from the admin API's runtime properties:
// Ready is the active count, which includes locked (in-flight) messages;
// Delayed is the scheduled count; Dead is the dead-letter count.
func (d *Driver) Stats(ctx context.Context) (driver.Stats, error) {
	const op = "stats"
	if err := d.closing.Err(); err != nil {
		return driver.Stats{}, err
	}
	if d.admin == nil {
		return driver.Stats{}, driver.Errorf(errcode.Unimplemented,
			"servicebus stats: counts come from the admin API, and this queue was opened without an admin client (pass one to servicebus.New)")
	}
	p, err := d.admin.GetQueueRuntimeProperties(ctx, d.queue, nil)
	if err != nil {
		err = d.fail(op, err)
		if errcode.Of(err) == errcode.PermissionDenied {
			return driver.Stats{}, driver.Errorf(errcode.PermissionDenied,
				"%w (counts come from the admin API, which needs Manage rights: a connection string with Manage, or the Azure Service Bus Data Owner role)", err)
		}
		return driver.Stats{}, err
	}
	if p == nil {
		return driver.Stats{}, driver.Errorf(errcode.NotFound, "servicebus stats: queue %s does not exist", d.queueURL())
	}
	return driver.Stats{
		Ready:   int64(p.ActiveMessageCount),
		Delayed: int64(p.ScheduledMessageCount),
		Dead:    int64(p.DeadLetterMessageCount),
		Known:   driver.KnownCounts{Ready: true, Delayed: true, Dead: true},
	}, nil
}

// Clear implements driver.Driver: it drains the queue with a
// receive-and-delete receiver, then cancels the scheduled messages that
// Peek finds. Locked messages are left to their holders. A scheduled
// message that comes due between the peek and the cancel cannot be
// canceled any more (Service Bus answers MessageNotFound): it is drained
// with the ready ones in one more pass.
func (d *Driver) Clear(ctx context.Context) (int64, error) {
	const op = "clear"
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	r, err := d.client.NewReceiverForQueue(d.queue, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		return 0, d.fail(op, err)
	}
	defer r.Close(context.WithoutCancel(ctx))
	n, err := d.drain(ctx, r)
	if err != nil {
		return n, d.fail(op, err)
	}
	var from int64
	due := false // a scheduled message came due before it could be canceled
	for {
		msgs, err := d.recv.PeekMessages(ctx, peekPage, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			return n, d.fail(op, err)
		}
		if len(msgs) == 0 {
			break
		}
		var scheduled []int64
		for _, m := range msgs {
			if m.State == azservicebus.MessageStateScheduled && m.SequenceNumber != nil {
				scheduled = append(scheduled, *m.SequenceNumber)
			}
			if m.SequenceNumber != nil {
				from = *m.SequenceNumber + 1
			}
		}
		canceled, err := d.cancelScheduled(ctx, scheduled)
		n += canceled
		if err != nil {
			return n, d.fail(op, err)
		}
		due = due || canceled < int64(len(scheduled))
	}
	if due {
		more, err := d.drain(ctx, r)
		n += more
		if err != nil {
			return n, d.fail(op, err)
		}
	}
	return n, nil
}

// drain receives and deletes what r finds until a receive comes back
// empty, and returns how many messages it deleted.
func (d *Driver) drain(ctx context.Context, r *azservicebus.Receiver) (int64, error) {
	var n int64
	sem := make(chan struct{}, 1)
	for {
		msgs, err := d.receive(ctx, r, sem, MaxReceiveBatch, time.Second)
		if err != nil || len(msgs) == 0 {
			return n, err
		}
		n += int64(len(msgs))
	}
}

// cancelScheduled cancels the scheduled messages seqs and returns how many
// it canceled. Service Bus refuses a request naming a sequence number that
// is no longer scheduled (MessageNotFound: it came due and was enqueued
// under a new sequence number, or someone canceled it); after such a
// refusal each is canceled on its own and the missing ones are skipped.
func (d *Driver) cancelScheduled(ctx context.Context, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	err := d.sender.CancelScheduledMessages(ctx, seqs, nil)
	if err == nil {
		return int64(len(seqs)), nil
	}
	if errorCode(err) != errcode.NotFound {
		return 0, err
	}
	var n int64
	for _, seq := range seqs {
		err := d.sender.CancelScheduledMessages(ctx, []int64{seq}, nil)
		switch {
		case err == nil:
			n++
		case errorCode(err) != errcode.NotFound:
			return n, err
		}
	}
	return n, nil
}
