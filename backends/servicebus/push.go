package servicebus

import (
	"context"
	"errors"
	"time"
	"unicode/utf16"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// maxMessageIDLen is Service Bus's limit on MessageId, in characters
// (UTF-16 units).
const maxMessageIDLen = 128

// checkMessageID refuses a task ID that Service Bus would refuse as a
// MessageId.
func checkMessageID(id string) error {
	if n := messageIDLen(id); n > maxMessageIDLen {
		return driver.Errorf(errcode.InvalidArgument,
			"servicebus push: task ID %q is %d characters, longer than Service Bus's %d-character MessageId limit; use a shorter ID", id, n, maxMessageIDLen)
	}
	return nil
}

// messageIDLen is the length of id as Service Bus counts it: UTF-16 units.
// Up to maxMessageIDLen bytes it is the byte count, which bounds them.
func messageIDLen(id string) int {
	if len(id) <= maxMessageIDLen {
		return len(id)
	}
	n := 0
	for _, r := range id {
		n += utf16.RuneLen(r)
	}
	return n
}

// Push implements driver.Driver. Messages due now go out in as few batches
// as their size allows; messages with a future NotBefore are scheduled one
// by one (at NotBefore on the broker's clock, as far as the driver knows
// it). Results are returned in order, so a partial failure leaves a prefix
// of stored messages.
func (d *Driver) Push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	const op = "push"
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if err := checkMessageID(m.ID); err != nil {
			return nil, err
		}
	}
	if err := d.rec.AddPushGroups(ctx, msgs); err != nil {
		return nil, err
	}
	results := make([]driver.PushResult, 0, len(msgs))
	now := time.Now()
	for i := 0; i < len(msgs); {
		if m := msgs[i]; m.NotBefore.After(now) {
			if _, err := d.sender.ScheduleMessages(ctx, []*azservicebus.Message{withTrace(newMessage(m.ID, m.ID, m.Body, 0), m.TraceParent)}, d.clock.broker(m.NotBefore), nil); err != nil {
				return results, d.fail(op, err)
			}
			results = append(results, driver.PushResult{MessageID: m.ID})
			i++
			continue
		}
		batch, err := d.sender.NewMessageBatch(ctx, nil)
		if err != nil {
			return results, d.fail(op, err)
		}
		j := i
		for ; j < len(msgs) && !msgs[j].NotBefore.After(now); j++ {
			err := batch.AddMessage(withTrace(newMessage(msgs[j].ID, msgs[j].ID, msgs[j].Body, 0), msgs[j].TraceParent), nil)
			if errors.Is(err, azservicebus.ErrMessageTooLarge) && batch.NumMessages() > 0 {
				break // the batch is full: send it and start another
			}
			if err != nil {
				return results, d.fail(op, err)
			}
		}
		if err := d.sender.SendMessageBatch(ctx, batch, nil); err != nil {
			return results, d.fail(op, err)
		}
		for ; i < j; i++ {
			results = append(results, driver.PushResult{MessageID: msgs[i].ID})
		}
	}
	return results, nil
}

// newMessage builds a Service Bus message. msgID is what duplicate
// detection keys on: the task ID for pushes, a fresh ID for copies (which
// must not be dropped as duplicates of their original). taskID, when known,
// rides in an application property; prior carries the deliveries of the
// message a copy replaces.
func newMessage(msgID, taskID string, body []byte, prior int) *azservicebus.Message {
	m := &azservicebus.Message{Body: body, ApplicationProperties: map[string]any{}}
	if msgID != "" {
		m.MessageID = &msgID
	}
	if taskID != "" {
		m.ApplicationProperties[PropTaskID] = taskID
	}
	if prior > 0 {
		m.ApplicationProperties[PropPriorDeliveries] = int64(prior)
	}
	return m
}
