package servicebus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// deadLetterOverhead is what a dead-lettered message needs beyond its
// body, application properties, reason and description: system properties,
// annotations, encoding.
const deadLetterOverhead = 2 * 1024

// maxHeaderBytes is Service Bus's limit on a message's properties
// (application and system) taken together, also once it is dead-lettered
// with its reason and description among them; more is refused with an
// error that asks to retry. Each property is also at most 32 KB, which a
// reason or description of MaxDeadLetterTextLen characters never reaches.
// https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas
const maxHeaderBytes = 64 * 1024

// settle runs fn on each lease's message, at most once per lease: a lease
// settled before is LockLost without a call. A failure other than LockLost
// leaves the lease usable, so the caller may try again. Each settlement is
// its own round trip, so up to settleParallelism run at once (the portable
// layer hands over its completions in batches).
func (d *Driver) settle(ctx context.Context, op string, leases []driver.Lease, fn func(*held, int) error) []error {
	if err := d.closing.Err(); err != nil {
		return driver.FanOut(err, len(leases))
	}
	errs := make([]error, len(leases))
	one := func(i int) {
		h, err := d.heldOf(op, leases[i])
		if err == nil && !h.settled.CompareAndSwap(false, true) {
			err = d.lockLost(op)
		}
		if err == nil {
			if err = fn(h, i); err != nil {
				err = d.fail(op, err)
				if errcode.Of(err) != errcode.LockLost {
					h.settled.Store(false)
				}
			}
		}
		errs[i] = err
	}
	if len(leases) == 1 {
		one(0)
	} else {
		var wg sync.WaitGroup
		sem := make(chan struct{}, settleParallelism)
		for i := range leases {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				one(i)
			})
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// settleParallelism bounds the settlements of one batch in flight at once.
const settleParallelism = 16

// linkSettleTimeout bounds a settlement on the receiver's link before
// settleOnce falls back to the management link.
const linkSettleTimeout = time.Second

// settleOnce settles h's message with fn on the link it arrived on. When
// that link's connection is gone the SDK keeps retrying on the dead link
// (a message is bound to its link), so after a connection error, or after
// linkSettleTimeout, it settles again by lock token alone, which the SDK
// sends over the management link and Service Bus accepts for a message
// received on any link. Neither path can settle twice: a lock settled by the
// first attempt makes the second fail with LockLost.
func settleOnce(ctx context.Context, h *held, fn func(context.Context, *azservicebus.ReceivedMessage) error) error {
	lctx, cancel := context.WithTimeout(ctx, linkSettleTimeout)
	err := fn(lctx, h.msg)
	cancel()
	if err == nil || ctx.Err() != nil {
		return err
	}
	if errorCode(err) != errcode.Unavailable && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fn(ctx, &azservicebus.ReceivedMessage{LockToken: h.msg.LockToken})
}

// Complete implements driver.Driver with CompleteMessage. Records live in
// another store (Results is never Native), so the requests carry none.
func (d *Driver) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	leases := make([]driver.Lease, len(reqs))
	for i, r := range reqs {
		leases[i] = r.Lease
	}
	return d.settle(ctx, "complete", leases, func(h *held, _ int) error {
		return settleOnce(ctx, h, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			return h.recv.CompleteMessage(ctx, m, nil)
		})
	})
}

// Requeue implements driver.Driver.
//
// A requeue that counts — a retry after a failure (Failed), or any requeue
// with requeue=redeliver — is AbandonMessage: visible at once, and Service
// Bus counts the delivery. Under requeue=schedule (the default) a retry
// with a delay (its backoff) is a scheduled copy instead, which carries
// the delivery counted. When that abandon would reach the queue's max
// delivery count, and so make Service Bus dead-letter the message before
// jobq's retry budget is spent, the message is carried over to a copy
// instead (see requeueCopy), which restarts the broker's count.
//
// Any other requeue (a gate miss, a busy key, a rate limit, a stopping
// worker) schedules a copy at the delay and completes the original, so
// that it uses up neither a retry nor a broker delivery.
func (d *Driver) Requeue(ctx context.Context, reqs []driver.RequeueParams) []error {
	leases := make([]driver.Lease, len(reqs))
	for i, r := range reqs {
		leases[i] = r.Lease
	}
	return d.settle(ctx, "requeue", leases, func(h *held, i int) error {
		r := reqs[i]
		counts := r.Failed || d.cfg.requeue == RequeueRedeliver
		redeliver := r.Delay < abandonBelow || d.cfg.requeue == RequeueRedeliver
		if counts && redeliver && int(h.msg.DeliveryCount) < d.maxDelivery {
			return settleOnce(ctx, h, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
				return h.recv.AbandonMessage(ctx, m, nil)
			})
		}
		// Here the requeue is a copy: one that does not count, one whose
		// abandon would reach the max delivery count, or a retry after
		// its backoff (an abandon cannot wait), which counts this delivery.
		uncounted := h.uncounted
		switch {
		case !counts:
			uncounted++
		case int(h.msg.DeliveryCount) >= d.maxDelivery:
			d.warnCarriedOver.Do(func() {
				d.log.Warn("servicebus: a requeue would have reached the queue's max delivery count, and Service Bus would dead-letter the task before its retries are spent; jobq requeues it as a copy instead (raise the max delivery count above the tasks' num_retries)",
					"queue", d.queue, "max_delivery_count", d.maxDelivery, "delivery", h.deliveries())
			})
		}
		return d.requeueCopy(ctx, h, r.Delay, uncounted)
	})
}

// abandonBelow is the shortest retry delay worth a scheduled copy: a
// shorter one is an abandon, which the broker redelivers about as soon.
const abandonBelow = time.Second

// requeueCopy schedules a copy of h's message at delay from now (on the
// broker's clock) and then completes the original. The copy has a fresh
// MessageId (or duplicate detection would drop it), the task ID, and the
// delivery counts carried over in application properties.
//
// The copy is canceled only when the original is known to be still in the
// queue: its completion was refused because the lock is lost (so no
// completion of ours can still apply) and a peek finds the original at its
// sequence number. Otherwise — the completion was applied but its
// acknowledgement was late or lost, or its outcome is unknown — the copy
// stays and the requeue succeeds: the task may run twice, never zero times.
func (d *Driver) requeueCopy(ctx context.Context, h *held, delay time.Duration, uncounted int) error {
	m := h.msg
	if m.LockedUntil != nil && !time.Now().Before(d.clock.local(*m.LockedUntil)) {
		// The lock has expired: the original is back in the queue (or with
		// another receiver), and a copy could not be taken back once due.
		return d.lockLost("requeue")
	}
	cp := copyOf(m, h.deliveries(), uncounted)
	seqs, err := d.sender.ScheduleMessages(ctx, []*azservicebus.Message{cp}, d.clock.broker(time.Now().Add(delay)), nil)
	if err != nil {
		return err
	}
	err = settleOnce(ctx, h, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		return h.recv.CompleteMessage(ctx, m, nil)
	})
	if err == nil {
		return nil
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if errorCode(err) == errcode.LockLost && m.SequenceNumber != nil {
		there, perr := d.stillQueued(bg, *m.SequenceNumber)
		if perr == nil && there {
			if cerr := d.sender.CancelScheduledMessages(bg, seqs, nil); cerr != nil {
				d.log.Error("servicebus: a requeue scheduled a copy, lost the original's lock, and could not cancel the copy; the task will run twice",
					"queue", d.queue, "message_id", m.MessageID, "cancel_error", cerr)
			}
			return err
		}
		if perr != nil {
			err = fmt.Errorf("%w (and a peek for the original failed: %v)", err, perr)
		}
	}
	d.log.Warn("servicebus: a requeue scheduled a copy, but the original's completion did not report success; the original may have been completed (a lost acknowledgement) or may come back when its lock expires, so the copy stays: the task may run twice",
		"queue", d.queue, "message_id", m.MessageID, "complete_error", err)
	return nil
}

// stillQueued reports whether the message with sequence number seq is
// still in the queue (locked or not).
func (d *Driver) stillQueued(ctx context.Context, seq int64) (bool, error) {
	msgs, err := d.recv.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seq})
	if err != nil {
		return false, err
	}
	return len(msgs) > 0 && msgs[0].SequenceNumber != nil && *msgs[0].SequenceNumber == seq, nil
}

// copyOf builds the copy of m that a requeue schedules: the same body and
// application properties, a fresh MessageId, and the delivery counts so far.
func copyOf(m *azservicebus.ReceivedMessage, deliveries, uncounted int) *azservicebus.Message {
	cp := newMessage("requeue-"+tokenString(m.LockToken), taskID(m), m.Body, 0)
	for k, v := range m.ApplicationProperties {
		if _, ours := cp.ApplicationProperties[k]; !ours {
			cp.ApplicationProperties[k] = v
		}
	}
	cp.ApplicationProperties[PropPriorDeliveries] = int64(deliveries)
	cp.ApplicationProperties[PropUncountedDeliveries] = int64(uncounted)
	cp.ContentType, cp.Subject, cp.CorrelationID = m.ContentType, m.Subject, m.CorrelationID
	return cp
}

// DeadLetter implements driver.Driver with DeadLetterMessage: the message
// moves to the queue's $DeadLetterQueue sub-queue with the reason and the
// detail as its description.
func (d *Driver) DeadLetter(ctx context.Context, reqs []driver.DeadLetterParams) []error {
	leases := make([]driver.Lease, len(reqs))
	for i, r := range reqs {
		leases[i] = r.Lease
	}
	return d.settle(ctx, "dead-letter", leases, func(h *held, i int) error {
		reason, detail := deadLetterTexts(h.msg, reqs[i].Reason, reqs[i].Detail)
		opts := &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &detail,
			PropertiesToModify: map[string]any{PropDeadAt: time.Now().UTC()}}
		return settleOnce(ctx, h, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			return h.recv.DeadLetterMessage(ctx, m, opts)
		})
	})
}

// deadLetterTexts cuts a dead letter's reason and description to what
// Service Bus accepts: each at most MaxDeadLetterTextLen characters (cut by
// bytes, which also bounds UTF-16 units), and together small enough that
// the dead-lettered message, which carries them as properties, stays
// within MaxBrokerMessageBytes and its properties within maxHeaderBytes:
// then the description keeps at least half the room. The description loses its start (the end of a task's output
// says why it failed), the reason its end.
func deadLetterTexts(m *azservicebus.ReceivedMessage, reason, detail string) (string, string) {
	reason, detail = cutTail(reason, MaxDeadLetterTextLen, false), cutTail(detail, MaxDeadLetterTextLen, true)
	props := propertiesSize(m.ApplicationProperties)
	room := min(MaxBrokerMessageBytes-len(m.Body), maxHeaderBytes) - deadLetterOverhead - props
	if len(reason)+len(detail) <= room {
		return reason, detail
	}
	detail = cutTail(detail, max(room-len(reason), room/2, 0), true)
	reason = cutTail(reason, max(room-len(detail), 0), false)
	return reason, detail
}

// propertiesSize estimates the encoded size of application properties.
func propertiesSize(props map[string]any) int {
	n := 0
	for k, v := range props {
		n += len(k) + 16
		switch v := v.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			n += 16
		}
	}
	return n
}

// cutTail shortens s to at most n bytes on a rune boundary, keeping the
// end when tail is set (the tail of a task's output is what explains a
// failure) and the start otherwise.
func cutTail(s string, n int, tail bool) string {
	if len(s) <= n {
		return s
	}
	if n < 3 {
		return ""
	}
	if tail {
		s = s[len(s)-n+3:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
		return "..." + s
	}
	s = s[:n-3]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
