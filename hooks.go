package jobq

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/recmarks"
	"github.com/jobq/jobq/stash"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// init lends the entry points that are not public API to the packages of
// this module that need them; see package internal/hooks.
func init() {
	hooks.MarshalTask = func(t any) ([]byte, error) { return encodeTask(t.(*Task)) }
	hooks.UnmarshalTask = func(body []byte) (any, error) {
		t, err := unmarshalTask(body)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	hooks.TaskID = func(t any) (string, error) { return taskID(t.(*Task)) }

	hooks.AnnounceWorker = func(ctx context.Context, q, w any) error {
		return asQueue(q).announceWorker(ctx, w.(*WorkerInfo))
	}
	hooks.WithdrawWorker = func(ctx context.Context, q, w any) error {
		return asQueue(q).withdrawWorker(ctx, w.(*WorkerInfo))
	}
	hooks.CancelRequested = func(ctx context.Context, q any, ids []string) ([]string, error) {
		return asQueue(q).cancelRequested(ctx, ids, nil)
	}
	hooks.CancelRequestedOf = func(ctx context.Context, q any, ids []string, pushed []time.Time) ([]string, error) {
		return asQueue(q).cancelRequested(ctx, ids, pushed)
	}
	hooks.MaybeApplied = maybeApplied
	hooks.MarkMaybeApplied = markMaybeApplied
	hooks.GoneTasks = func(ctx context.Context, q any, ids []string, since time.Time, marks recmarks.Set) (gone, early []string, ok bool, err error) {
		return asQueue(q).goneTasks(ctx, ids, since, marks)
	}
	hooks.MarkRecords = func(ctx context.Context, q any, tasks any, marks recmarks.Set) error {
		return asQueue(q).markRecords(ctx, tasks.([]*Task), marks)
	}
	hooks.MarkedWait = func(after time.Time, marks recmarks.Set) any { return WaitOptions{After: after, marks: marks} }
	hooks.BaseAttributes = func(q any) []attribute.KeyValue { return asQueue(q).baseAttributes() }
	hooks.MeterProvider = func(q any) metric.MeterProvider { return asQueue(q).tel.mp }
	hooks.TracerProvider = func(q any) trace.TracerProvider { return asQueue(q).tel.tp }
	hooks.URL = func(q any) string { return asQueue(q).url }
	hooks.FireSchedules = func(ctx context.Context, q any, now time.Time, fault func(stage, name string, slot time.Time) error) ([]driver.ScheduleRun, time.Time, error) {
		return asQueue(q).Admin().fireSchedules(ctx, now, fault)
	}
	hooks.HeldTask = func(ctx context.Context, q any, id string) (*driver.HeldMessage, error) {
		return asQueue(q).heldTask(ctx, "held", id)
	}
	hooks.SweepHeld = func(ctx context.Context, q any) (released, cancelled []string, held int, err error) {
		res, held, err := asQueue(q).Admin().sweepHeld(ctx)
		return res.Released, res.Cancelled, held, err
	}
	hooks.Scheme = func(q any) string { return asQueue(q).scheme }
	hooks.Driver = func(q any) driver.Driver { return asQueue(q).drv }
	hooks.Stash = func(q any) stash.Store { return asQueue(q).stash.primary }
	hooks.Retention = func(q any) time.Duration { return asQueue(q).policies.retention(context.Background()) }

	hooks.RecordAttempt = func(e, a any) {
		if p, ok := a.(*Attempt); ok {
			e.(*Envelope).recordAttempt(p)
			return
		}
		v := a.(Attempt)
		e.(*Envelope).recordAttempt(&v)
	}
	hooks.TaskContext = func(parent context.Context, e any) (context.Context, context.CancelCauseFunc) {
		return e.(*Envelope).context(parent)
	}
	hooks.LostDeliveries = func(e any) []int { return e.(*Envelope).lostDeliveries() }
	hooks.StartSpan = func(ctx context.Context, e any) (context.Context, trace.Span) {
		return e.(*Envelope).startSpan(ctx)
	}
	hooks.EndSpan = func(e any) { e.(*Envelope).endSpan() }
	hooks.ProducerSpanContext = func(e any) trace.SpanContext { return e.(*Envelope).producerSpanContext() }
	hooks.EnvelopeCancelRequested = func(ctx context.Context, e any) (bool, error) {
		return e.(*Envelope).cancelRequested(ctx)
	}

	hooks.DeadLookTest = func(q any, after, every time.Duration, page int, look func(n int)) {
		asQueue(q).deadTest.Store(&deadLookTest{after: after, every: every, page: page, look: look})
	}
	hooks.ParsePolicy = parsePolicy
	hooks.ParseBackoff = func(s string) (any, error) { return parseBackoff(s) }
}

// asQueue is the *Queue a hook was given: the queue itself or a value that
// embeds one (its promoted Admin method leads back to it).
func asQueue(v any) *Queue {
	switch q := v.(type) {
	case *Queue:
		return q
	case interface{ Admin() *Admin }:
		return q.Admin().q
	}
	panic(fmt.Sprintf("jobq: internal hook given a %T, not a *jobq.Queue", v))
}
