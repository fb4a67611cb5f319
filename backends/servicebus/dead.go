package servicebus

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// deadWait is how long a scan of the dead-letter sub-queue waits for more
// messages before it decides it has seen them all.
const deadWait = time.Second

// ListDead implements driver.Driver by peeking the $DeadLetterQueue
// sub-queue. A dead letter's MessageID is its sequence number there.
func (d *Driver) ListDead(ctx context.Context, max int) ([]*driver.DeadMessage, error) {
	const op = "list dead letters"
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	msgs, err := d.peekAll(ctx, d.dead, max)
	if err != nil {
		return nil, d.fail(op, err)
	}
	out := make([]*driver.DeadMessage, len(msgs))
	for i, m := range msgs {
		out[i] = d.deadMessage(m)
	}
	return out, nil
}

// deadMessage turns a peeked dead letter into the driver's form.
func (d *Driver) deadMessage(m *azservicebus.ReceivedMessage) *driver.DeadMessage {
	dm := &driver.DeadMessage{
		MessageID:     deadID(m),
		ID:            taskID(m),
		Body:          m.Body,
		DeliveryCount: endedDeliveries(m),
	}
	if m.DeadLetterReason != nil {
		dm.Reason = *m.DeadLetterReason
	}
	if !brokerDeadLettered[dm.Reason] {
		dm.DeliveryCount++ // the delivery that dead-lettered it, still locked then
	}
	if m.DeadLetterErrorDescription != nil {
		dm.Detail = *m.DeadLetterErrorDescription
	}
	// The broker's own letters have no jobq-dead-at, and Azure keeps a
	// letter's enqueued time: theirs is the push's.
	if t, ok := m.ApplicationProperties[PropDeadAt].(time.Time); ok {
		dm.DeadAt = t
	} else if m.EnqueuedTime != nil {
		dm.DeadAt = d.clock.local(*m.EnqueuedTime)
	}
	return dm
}

// brokerDeadLettered holds the reasons Service Bus itself gives a message it
// moves to the dead letters between deliveries: after the last delivery
// ended (MaxDeliveryCountExceeded) or when its time-to-live ran out
// (TTLExpiredException). Every delivery such a message had has ended, so
// its count already holds them all; a message dead-lettered by a receiver
// (DeadLetterMessage) had one more, still locked when it was moved.
var brokerDeadLettered = map[string]bool{
	"MaxDeliveryCountExceeded": true,
	"TTLExpiredException":      true,
}

func deadID(m *azservicebus.ReceivedMessage) string {
	if m.SequenceNumber == nil {
		return m.MessageID
	}
	return strconv.FormatInt(*m.SequenceNumber, 10)
}

// RequeueDead implements driver.Driver: each chosen dead letter's result
// record is deleted, then it is sent to the queue as a copy (a fresh
// MessageId so duplicate detection keeps it, the task ID in a property, a
// fresh delivery count) and completed in the sub-queue; a crash in between
// leaves a duplicate, never a loss.
func (d *Driver) RequeueDead(ctx context.Context, ids []string) (int64, error) {
	// The records go before the sends (the new run may end, and write its
	// record, at once), a received batch's at once: one by one, with the
	// scan's other letters locked meanwhile, they made a scan outlast its
	// locks.
	forget := func(chosen []*azservicebus.ReceivedMessage) error {
		tasks := make([]string, len(chosen))
		for i, m := range chosen {
			tasks[i] = taskID(m)
		}
		return d.rec.ForgetRequeued(ctx, tasks...)
	}
	return d.scanDead(ctx, "requeue dead letters", ids, forget, func(m *azservicebus.ReceivedMessage) error {
		cp := newMessage("requeue-"+tokenString(m.LockToken), taskID(m), m.Body, 0)
		if err := d.sender.SendMessage(ctx, cp, nil); err != nil {
			return err
		}
		return d.dead.CompleteMessage(ctx, m, nil)
	})
}

// deadRenewAfter is how long after a batch of dead letters was locked
// scanDead renews a message's lock before it settles it: half the queue's
// lock duration, or half the shortest one Azure allows when it is unknown.
func (d *Driver) deadRenewAfter() time.Duration {
	if d.clock.lock > 0 {
		return d.clock.lock / 2
	}
	return MinLockDuration / 2
}

// PurgeDead implements driver.Driver by completing the chosen dead letters.
func (d *Driver) PurgeDead(ctx context.Context, ids []string) (int64, error) {
	return d.scanDead(ctx, "purge dead letters", ids, nil, func(m *azservicebus.ReceivedMessage) error {
		return d.dead.CompleteMessage(ctx, m, nil)
	})
}

// scanDead peek-locks the dead letters and applies fn to those that ids
// names (by sequence number, MessageId or task ID; all when ids is nil),
// after prepare, when set, with the chosen ones of each received batch.
// Messages that are not chosen stay locked until the scan ends, so that no
// message is seen twice, and are then abandoned.
func (d *Driver) scanDead(ctx context.Context, op string, ids []string, prepare func([]*azservicebus.ReceivedMessage) error,
	fn func(*azservicebus.ReceivedMessage) error) (int64, error) {
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var skipped []*azservicebus.ReceivedMessage
	passed := map[int64]bool{} // the sequence numbers of skipped
	defer func() {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, m := range skipped {
			_ = d.dead.AbandonMessage(actx, m, nil)
		}
	}()
	var n int64
	found := map[string]bool{} // the IDs a settled message matched
	for ids == nil || len(found) < len(want) {
		msgs, err := d.receive(ctx, d.dead, d.deadSem, cmp.Or(d.deadBatch, MaxReceiveBatch), deadWait)
		if err != nil {
			return n, d.fail(op, err)
		}
		if len(msgs) == 0 {
			break
		}
		locked := time.Now()
		if err := prepareChosen(prepare, want, ids == nil, msgs); err != nil {
			skipped = append(skipped, msgs...)
			return n, d.fail(op, err)
		}
		for i, m := range msgs {
			keys := matches(want, m)
			if ids != nil && len(keys) == 0 {
				skipped = append(skipped, m)
				if m.SequenceNumber != nil {
					if passed[*m.SequenceNumber] {
						// Its lock ran out while the scan went on: Service
						// Bus hands out the earliest messages first, so the
						// scan would pass over the same ones again and again.
						skipped = append(skipped, msgs[i+1:]...)
						return n, d.scanOutlastedLock(op, len(passed), len(found), len(want))
					}
					passed[*m.SequenceNumber] = true
				}
				continue
			}
			if time.Since(locked) > d.deadRenewAfter() {
				// The batch was locked at once and is settled one by one:
				// a lock that ran out would let fn send a copy and then
				// fail to complete the original, leaving both.
				if err := d.dead.RenewMessageLock(ctx, m, nil); err != nil {
					if errcode.Of(d.fail(op, err)) == errcode.LockLost {
						continue // back in the sub-queue: received again
					}
					skipped = append(skipped, msgs[i:]...)
					return n, d.fail(op, err)
				}
			}
			if err := fn(m); err != nil {
				skipped = append(skipped, msgs[i+1:]...)
				return n, d.fail(op, err)
			}
			n++
			for _, k := range keys {
				found[k] = true
			}
		}
	}
	return n, nil
}

// prepareChosen runs prepare, when set, with the messages of msgs that want
// names (all of them when all).
func prepareChosen(prepare func([]*azservicebus.ReceivedMessage) error, want map[string]bool, all bool, msgs []*azservicebus.ReceivedMessage) error {
	if prepare == nil {
		return nil
	}
	var chosen []*azservicebus.ReceivedMessage
	for _, m := range msgs {
		if all || len(matches(want, m)) > 0 {
			chosen = append(chosen, m)
		}
	}
	if len(chosen) == 0 {
		return nil
	}
	return prepare(chosen)
}

// scanOutlastedLock is the error of a scan for named dead letters that took
// longer than a lock lasts, so that the first ones it passed over came back.
func (d *Driver) scanOutlastedLock(op string, passed, found, want int) error {
	return driver.Errorf(errcode.FailedPrecondition,
		"servicebus %s %s: the scan went past %d other dead letters and ran longer than their lock, so they came back before it reached the rest; %d of the %d IDs were found and settled; raise the queue's lock duration, or purge the dead letters you do not need, so that a scan gets through them",
		op, d.queueURL(), passed, found, want)
}

// matches returns the IDs in want that name dead letter m: its sequence
// number, its MessageId, its task ID. A task ID may name several dead
// letters, so a scan ends when every ID has matched one, not after as many
// messages as IDs.
func matches(want map[string]bool, m *azservicebus.ReceivedMessage) []string {
	var keys []string
	for _, k := range [...]string{deadID(m), m.MessageID, taskID(m)} {
		if k != "" && want[k] && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
