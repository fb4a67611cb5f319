package jobq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Envelope is one received message: the task and the lease on it. Settle it
// exactly once with Complete, Requeue, DeadLetter or Fail; keep it with Renew
// while the work takes longer than the lease. Its methods may be called from
// several goroutines (a heartbeat renews while the handler settles).
type Envelope struct {
	// Task is the received task.
	Task *Task
	// MessageID is the backend's identity of the message.
	MessageID string
	// DeliveryCount is how many times the message has been received,
	// including this time.
	DeliveryCount int
	// EnqueuedAt is when the message was first pushed, if the backend knows.
	EnqueuedAt time.Time

	q          *Queue
	wire       *Task // the task as it was on the wire (a stash reference, say)
	uncounted  int   // earlier deliveries that did not use up a retry (driver.Received)
	visibility time.Duration

	mu       sync.Mutex
	lease    driver.Lease
	settled  bool
	lost     chan struct{}
	lostOnce sync.Once
	// onLost are Context's cancellations, run when the lease is lost;
	// lostFirst backs the first, so that the usual one context per
	// envelope costs no allocation of its own.
	onLost    []context.CancelCauseFunc
	lostFirst [1]context.CancelCauseFunc
	timer     *time.Timer
	attempt   *Attempt       // set by RecordAttempt, stored by the settlement (attempts.go)
	result    *ResultDetails // set by SetResult, stored in the result record (results.go)
	// traceParent is the producer's W3C trace context (driver.Received);
	// traced says whether a tracer provider was installed when the message
	// was received, and span is the process span StartSpan started
	// (telemetry.go).
	traceParent string
	traced      bool
	span        trace.Span
	// group is the task's group (driver.Received.Group), empty for none.
	group string
}

func newEnvelope(q *Queue, r *driver.Received, wire, task *Task, vis time.Duration) *Envelope {
	return &Envelope{
		Task:          task,
		MessageID:     r.Lease.MessageID,
		DeliveryCount: r.DeliveryCount,
		EnqueuedAt:    r.EnqueuedAt,
		q:             q,
		uncounted:     r.UncountedDeliveries,
		wire:          wire,
		visibility:    vis,
		lease:         r.Lease,
		lost:          make(chan struct{}),
		traceParent:   r.TraceParent,
		traced:        q.tel.tracing(),
		group:         r.Group,
	}
}

// Expiry returns when the lease runs out unless renewed.
func (e *Envelope) Expiry() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lease.Expiry
}

// Visibility returns the lease duration the message was received with.
func (e *Envelope) Visibility() time.Duration { return e.visibility }

// Queue returns the queue the message came from.
func (e *Envelope) Queue() *Queue { return e.q }

// LockLost returns a channel that is closed when this receiver no longer
// holds the lease: a Renew or settlement reported LockLost, or the lease's
// expiry passed without a renewal. Work on the task should stop then: the
// message may already be with another receiver.
func (e *Envelope) LockLost() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer == nil && !e.settled && !e.lease.Expiry.IsZero() {
		e.timer = time.AfterFunc(time.Until(e.lease.Expiry), e.markLost)
	}
	return e.lost
}

func (e *Envelope) markLost() {
	e.lostOnce.Do(func() {
		e.q.tel.lost.Add(context.Background(), 1, e.q.tel.add...)
		close(e.lost)
		e.mu.Lock()
		fns := e.onLost
		e.onLost = nil
		e.mu.Unlock()
		if len(fns) == 0 {
			return
		}
		err := e.lostError("lease")
		for _, cancel := range fns {
			cancel(err)
		}
	})
}

// Context returns a copy of parent that is canceled when this receiver no
// longer holds the lease (as LockLost tells), with a LockLost *Error as its
// cause (errors.Is(context.Cause(ctx), errcode.LockLost)), and the function that
// releases it. Work on the task can run under it, so that it stops when the
// message may be with another receiver. Unlike a goroutine waiting on
// LockLost, it costs no goroutine.
func (e *Envelope) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := e.context(parent)
	return ctx, func() { cancel(context.Canceled) }
}

// context is Context with the function that ends it with a cause of the
// caller's (the worker stops a task for a cancel request so, in the same
// context).
func (e *Envelope) context(parent context.Context) (context.Context, context.CancelCauseFunc) {
	if e.traced {
		parent = e.withSpan(parent) // the process span, if StartSpan started one
	}
	ctx, cancel := context.WithCancelCause(parent)
	lost := e.LockLost()
	e.mu.Lock()
	select {
	case <-lost:
		e.mu.Unlock()
		cancel(e.lostError("lease"))
	default:
		if e.onLost == nil {
			e.onLost = e.lostFirst[:0]
		}
		e.onLost = append(e.onLost, cancel)
		e.mu.Unlock()
	}
	return ctx, cancel
}

// lostError is the cause of a context ended by the lease's loss, and what
// operation op meets after the loss.
func (e *Envelope) lostError(op string) error {
	return &Error{Code: errcode.LockLost, Op: op, Queue: e.q.url,
		Msg: fmt.Sprintf("the lease on message %s was lost: another receiver may hold it now", e.MessageID)}
}

// settledError is what op meets on a settled envelope: LockLost when a
// settlement found the lease lost (so does every later call), else
// FailedPrecondition, its message "message ID " followed by what.
func (e *Envelope) settledError(op, what string) error {
	select {
	case <-e.lost:
		return e.lostError(op)
	default:
	}
	return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: e.q.url, Msg: fmt.Sprintf("message %s %s", e.MessageID, what)}
}

// begin marks the envelope settled; it fails when it was settled before,
// or when ctx has ended (nothing is sent then).
func (e *Envelope) begin(ctx context.Context, op string) (driver.Lease, error) {
	if err := e.q.checkLive(ctx, op); err != nil {
		return driver.Lease{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.settled {
		return driver.Lease{}, e.settledError(op, "was already settled (complete, requeue, dead-letter and fail settle a message once)")
	}
	e.settled = true
	if e.timer != nil {
		e.timer.Stop()
	}
	return e.lease, nil
}

// finish records the outcome of a settlement. An error whose answer was
// lost (a timeout, or a caller that stopped waiting for a batched
// completion) says the settlement may have been applied (MaybeApplied).
func (e *Envelope) finish(op string, err error) error {
	if err == nil {
		return nil
	}
	code := errcode.Of(err)
	maybe := driver.AppliedOf(err, code) == driver.MaybeApplied
	err = e.q.wrap(op, err)
	if maybe {
		err = markMaybeApplied(err)
	}
	if errcode.Of(err) == errcode.LockLost {
		e.markLost()
	} else {
		// The message was not settled; let the caller try again.
		e.mu.Lock()
		e.settled = false
		e.mu.Unlock()
	}
	return err
}

// Complete deletes the message: the task is done. It fails with LockLost when
// the lease was lost (the message then stays for whoever holds it now), and
// so does every settlement after that. When ctx ends while the completion
// is under way, Complete returns ctx's error with MaybeApplied set: the
// completion may still be applied.
func (e *Envelope) Complete(ctx context.Context) error {
	if e.traced && !inSettleSpan(ctx, e) {
		return e.completeTraced(ctx) // which calls Complete in its span
	}
	return e.complete(ctx, "complete", e.recordOf(ctx, driver.ResultSucceeded, "", ""), driver.GroupSucceeded)
}

// complete deletes the message, storing rec (when not nil) with it and
// adding one to the task's group counter st. Only a completion (op
// "complete") counts in jobq.tasks.completed: a cancel does not.
func (e *Envelope) complete(ctx context.Context, op string, rec *pendingRecord, st driver.GroupState) error {
	lease, err := e.begin(ctx, op)
	if err != nil {
		return err
	}
	if err := e.finish(op, e.q.settle.complete(ctx, lease, e.visibility, rec, e.tally(st))); err != nil {
		return err
	}
	e.q.dropStashed(ctx, e.wire.Stash)
	if op == "complete" {
		e.q.tel.completed.Add(ctx, 1, e.q.tel.add...)
	}
	return nil
}

// Requeue puts the message back, visible again after delay (0: at once).
// Its retry budget is not touched. On backends without a native delayed
// requeue the declared fallback applies, with a one-time warning. A delay
// longer than the backend's MaxVisibility (7 days on Azure Storage Queue)
// is shortened to it, with a one-time warning.
func (e *Envelope) Requeue(ctx context.Context, delay time.Duration) (err error) {
	ctx, span := e.startSettle(ctx, "requeue")
	defer e.endSettle(ctx, span, "requeue", &err)
	return e.requeue(ctx, "requeue", delay, nil, false)
}

// requeue puts the message back; failed says it is a retry after a failed
// attempt, which uses up a retry where the budget is counted from
// deliveries.
func (e *Envelope) requeue(ctx context.Context, op string, delay time.Duration, body []byte, failed bool) error {
	if delay < 0 {
		return errorf(errcode.InvalidArgument, op, "requeue delay %v is negative", delay)
	}
	if delay > 0 {
		if err := e.q.degrade(op, driver.DelayedRequeue); err != nil {
			return err
		}
		delay = e.q.fitDelay(delay)
	}
	if body == nil {
		body = e.historyBody(e.wire)
	}
	if m := e.q.caps.MaxMessageBytes; m > 0 && len(body) > m {
		return errorf(errcode.TooLarge, op, "the task's new body is %d bytes; the backend's limit is %d", len(body), m)
	}
	lease, err := e.begin(ctx, op)
	if err != nil {
		return err
	}
	var tally driver.GroupTally
	if failed {
		tally = e.tally(driver.GroupFailed)
	}
	errs := e.q.drv.Requeue(ctx, []driver.RequeueParams{{Lease: lease, Delay: delay, Body: body, Failed: failed, Tally: tally}})
	return e.finish(op, first(errs))
}

// Renew extends the lease to now+d; d = 0 renews for the visibility the
// message was received with. It fails with LockLost when the lease was lost,
// FailedPrecondition once the message is settled, and Unimplemented on
// backends that cannot renew.
func (e *Envelope) Renew(ctx context.Context, d time.Duration) error {
	const op = "renew"
	if err := e.q.checkLive(ctx, op); err != nil {
		return err
	}
	if d == 0 {
		d = e.visibility
	}
	if err := e.q.checkVisibility(op, d); err != nil {
		return err
	}
	if err := e.q.degrade(op, driver.LeaseRenewal); err != nil {
		return err
	}
	e.mu.Lock()
	if e.settled {
		e.mu.Unlock()
		return e.settledError(op, "is settled; there is no lease to renew")
	}
	lease := e.lease
	e.mu.Unlock()
	nl, err := e.q.drv.Renew(ctx, lease, d)
	if err != nil {
		err = e.q.wrapWrite(op, err)
		if errcode.Of(err) == errcode.LockLost {
			e.markLost()
		}
		return err
	}
	e.q.tel.renewed.Add(ctx, 1, e.q.tel.add...)
	e.mu.Lock()
	// Keep the newest token (Azure pop receipts change on every update).
	e.lease = nl
	if e.timer != nil {
		e.timer.Reset(time.Until(nl.Expiry))
	}
	e.mu.Unlock()
	return nil
}

// DeadLetter moves the message to the dead-letter store with a short reason
// and an optional longer detail (such as the tail of the task's output).
func (e *Envelope) DeadLetter(ctx context.Context, reason, detail string) (err error) {
	const op = "dead-letter"
	ctx, span := e.startSettle(ctx, "dead_letter")
	defer e.endSettle(ctx, span, "dead_letter", &err)
	if err := e.q.degrade(op, driver.DeadLetter); err != nil {
		return err
	}
	rec := e.recordOf(ctx, driver.ResultDeadLettered, reason, detail)
	lease, err := e.begin(ctx, op)
	if err != nil {
		return err
	}
	// Whatever bytes the reason and detail hold, the dead letter must be
	// stored: a refused one would bring the message back forever.
	errs := e.q.deadLetter(ctx, []driver.DeadLetterParams{{Lease: lease,
		Reason: settleText(reason, maxReasonBytes, false), Detail: settleText(detail, maxDetailBytes, true), Body: e.historyBody(e.wire),
		Result: rec.record(), Tally: e.tally(driver.GroupDeadLettered)}}, e.visibility)
	return e.finish(op, first(errs))
}

// FailResult says what Fail did.
type FailResult struct {
	// Retried is true when the task was requeued for another attempt, false
	// when it was dead-lettered.
	Retried bool
	// RetriesLeft is the retry budget after this failure.
	RetriesLeft int
	// Delay is how long the retry waits before it is visible again.
	Delay time.Duration
}

// retryDelay is the delay before this failed task's retry, noted in the
// pending attempt. Where the backend cannot delay a requeue it is zero,
// with a one-time warning.
func (e *Envelope) retryDelay(ctx context.Context) time.Duration {
	delay := e.retryBackoff(ctx).Delay(e.failures())
	if e.q.caps.Level(driver.DelayedRequeue) == driver.Unsupported {
		e.q.warnOnce(driver.DelayedRequeue, "a failed task is retried at once: the backend cannot delay a requeue, so the retry backoff is not applied")
		delay = 0
	}
	delay = e.q.fitDelay(delay)
	e.mu.Lock()
	if e.attempt != nil {
		a := *e.attempt
		a.RetryDelay = delay
		e.attempt = &a
	}
	e.mu.Unlock()
	return delay
}

// RetriesLeft returns the task's remaining retry budget: num_retries as
// stored where the backend decrements it in place, or num_retries less the
// earlier deliveries where it cannot (not counting those that ended in a
// Requeue, where the backend can tell them apart). A task that cannot be
// written back with a smaller budget (another tool wrote a field out of
// jobq's range, such as a priority of 5000) is counted by deliveries too.
func (e *Envelope) RetriesLeft() int {
	return e.retriesLeft(e.budgetInPlace())
}

// retriesLeft is RetriesLeft, told whether the budget is kept in place.
func (e *Envelope) retriesLeft(inPlace bool) int {
	if inPlace {
		return e.wire.NumRetries
	}
	counted := max(0, e.DeliveryCount-1-e.uncounted) // earlier deliveries that used up a retry
	return max(0, e.wire.NumRetries-counted)
}

// budgetInPlace reports whether a retry writes the task back with one
// retry fewer, so that the stored num_retries is the budget left. That
// needs an in-place update and a task that encodes: one written by another
// tool may hold a field jobq refuses to write (a priority out of range).
// Such a task is never rewritten, so it is the same at every delivery and
// each delivery decides alike; its budget is counted by deliveries.
func (e *Envelope) budgetInPlace() bool {
	if e.q.caps.Level(driver.InPlaceUpdate) != driver.Native {
		return false
	}
	if e.wire.NumRetries == 0 {
		return true // no retry to write back
	}
	next := *e.wire
	next.NumRetries--
	_, err := encodeTask(&next)
	return err == nil
}

// Fail records a failed attempt. While the retry budget lasts the message is
// requeued with one retry fewer, visible again after the task's retry
// backoff (Task.RetryBackoff, else the queue's retry-backoff policy, else
// the default: 10s doubling up to 10m), which the attempt history records; when it is spent
// the message is dead-lettered with cause as the reason and detail (such as
// the output's tail) kept beside it. Where the backend cannot delay a
// requeue at all, the retry comes at once (with a one-time warning).
func (e *Envelope) Fail(ctx context.Context, cause error, detail string) (res FailResult, err error) {
	ctx, span := e.startSettle(ctx, "fail")
	defer e.endSettle(ctx, span, "fail", &err)
	defer func() { e.countFail(ctx, res, err) }()
	inPlace := e.budgetInPlace()
	left := e.retriesLeft(inPlace)
	if left > 0 {
		delay := e.retryDelay(ctx)
		var body []byte
		switch {
		case inPlace:
			next := *e.wire
			next.NumRetries = left - 1
			body = e.historyBody(&next)
			if body == nil {
				b, err := encodeTask(&next) // budgetInPlace encoded it
				if err != nil {
					return FailResult{}, err
				}
				body = b
			}
		case e.q.caps.Level(driver.InPlaceUpdate) == driver.Native:
			// The task cannot be written back (budgetInPlace): the body
			// stays as it is and the deliveries count its budget.
		default:
			if err := e.q.degrade("fail", driver.InPlaceUpdate); err != nil {
				return FailResult{}, err
			}
		}
		return FailResult{Retried: true, RetriesLeft: left - 1, Delay: delay}, e.requeue(ctx, "fail", delay, body, true)
	}
	// The reason is the cause alone, so listings can show it in a column;
	// the dead letter records the delivery count beside it.
	reason := "failed with no retries left"
	if cause != nil {
		reason = cause.Error()
	}
	return FailResult{}, e.DeadLetter(ctx, reason, detail)
}

func first(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
