package servicebus

import (
	"context"
	"errors"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/driver"
)

// Service Bus keeps a dead letter's reason and description as application
// properties; long ones are cut to these many bytes.
const (
	maxReasonBytes = 1024
	maxDetailBytes = 8 * 1024
)

// settle runs fn on each lease's message, at most once per lease: a lease
// settled before is LockLost without a call. A failure other than LockLost
// leaves the lease usable, so the caller may try again. Each settlement is
// its own round trip, so up to settleParallelism run at once (the portable
// layer hands over its completions in batches).
func (d *Driver) settle(ctx context.Context, op string, leases []driver.Lease, fn func(*held, int) error) []error {
	if err := d.isClosed(op); err != nil {
		return repeat(err, len(leases))
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
				if driver.CodeOf(err) != driver.LockLost {
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

func repeat(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

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
	if errorCode(err) != driver.Unavailable && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fn(ctx, &azservicebus.ReceivedMessage{LockToken: h.msg.LockToken})
}

// Complete implements driver.Driver with CompleteMessage.
func (d *Driver) Complete(ctx context.Context, leases []driver.Lease) []error {
	return d.settle(ctx, "complete", leases, func(h *held, _ int) error {
		return settleOnce(ctx, h, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			return h.recv.CompleteMessage(ctx, m, nil)
		})
	})
}

// Requeue implements driver.Driver. Delay zero is AbandonMessage, which
// counts a delivery. Service Bus cannot delay an abandon: by default a
// delayed requeue is an abandon too; with requeue=schedule it schedules a
// copy (with a fresh MessageId, the task ID in a property and the delivery
// count carried over) and then completes the original. If the completion
// fails the copy is canceled; only if that fails too does the task exist
// twice.
func (d *Driver) Requeue(ctx context.Context, reqs []driver.RequeueParams) []error {
	leases := make([]driver.Lease, len(reqs))
	for i, r := range reqs {
		leases[i] = r.Lease
	}
	return d.settle(ctx, "requeue", leases, func(h *held, i int) error {
		delay := reqs[i].Delay
		if delay <= 0 || d.cfg.requeue != RequeueSchedule {
			return settleOnce(ctx, h, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
				return h.recv.AbandonMessage(ctx, m, nil)
			})
		}
		m := h.msg
		cp := newMessage("requeue-"+tokenString(m.LockToken), taskID(m), m.Body, int(m.DeliveryCount)+h.prior)
		seqs, err := d.sender.ScheduleMessages(ctx, []*azservicebus.Message{cp}, time.Now().Add(delay), nil)
		if err != nil {
			return err
		}
		err = settleOnce(ctx, h, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			return h.recv.CompleteMessage(ctx, m, nil)
		})
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if cerr := d.sender.CancelScheduledMessages(cctx, seqs, nil); cerr != nil {
				d.log.Error("servicebus: a delayed requeue scheduled a copy but could not complete the original nor cancel the copy; the task will run twice",
					"queue", d.queue, "message_id", m.MessageID, "complete_error", err, "cancel_error", cerr)
			}
			return err
		}
		return nil
	})
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
		reason, detail := cutTail(reqs[i].Reason, maxReasonBytes, false), cutTail(reqs[i].Detail, maxDetailBytes, true)
		opts := &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &detail,
			PropertiesToModify: map[string]any{PropDeadAt: time.Now().UTC()}}
		return settleOnce(ctx, h, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			return h.recv.DeadLetterMessage(ctx, m, opts)
		})
	})
}

// cutTail shortens s to at most n bytes on a rune boundary, keeping the
// end when tail is set (the tail of a task's output is what explains a
// failure) and the start otherwise.
func cutTail(s string, n int, tail bool) string {
	if len(s) <= n {
		return s
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
