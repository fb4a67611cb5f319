package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/otelkeys"
)

// telemetry is the worker's own instruments, made by the queue's
// MeterProvider (jobq.Options.MeterProvider, or the global one): the
// handlers' run time and the tasks the worker holds. The queue counts the
// settlements, renewals and lost leases itself, and makes the spans.
type telemetry struct {
	duration metric.Float64Histogram
	// held is the count of tasks held, which jobq.tasks.in_flight reports
	// at each collection (an atomic add per task, no SDK call).
	held     atomic.Int64
	inFlight metric.Int64ObservableUpDownCounter
	observe  []metric.ObserveOption
	outcomes map[string][]metric.RecordOption
}

// The outcomes of a handler's run, as the jobq.outcome attribute of
// jobq.task.duration.
const (
	runCompleted = "completed"
	runFailed    = "failed"
	runLockLost  = "lock_lost"
	runStopped   = "stopped"
	runSnoozed   = "snoozed"
	runCancelled = "cancelled"
)

func newTelemetry(q *jobq.Queue, w *Worker) *telemetry {
	m := hooks.MeterProvider(q).Meter(otelkeys.InstrumentationName)
	t := &telemetry{outcomes: map[string][]metric.RecordOption{}}
	var err error
	if t.duration, err = m.Float64Histogram("jobq.task.duration", metric.WithUnit("s"),
		metric.WithDescription("How long handlers ran, by outcome (jobq.outcome: completed, failed, lock_lost, stopped, snoozed, cancelled)."),
		metric.WithExplicitBucketBoundaries(otelkeys.DurationBuckets...)); err != nil {
		w.log.Warn("could not create a metric", "metric", "jobq.task.duration", "error", err)
	}
	base := hooks.BaseAttributes(q)
	t.observe = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(base...))}
	// The callback stays registered for the meter provider's life: it
	// only reads a number.
	if t.inFlight, err = m.Int64ObservableUpDownCounter("jobq.tasks.in_flight", metric.WithUnit("{task}"),
		metric.WithDescription("Tasks this worker holds: running, or claimed and waiting for a handler."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.held.Load(), t.observe...)
			return nil
		})); err != nil {
		w.log.Warn("could not create a metric", "metric", "jobq.tasks.in_flight", "error", err)
	}
	for _, o := range []string{runCompleted, runFailed, runLockLost, runStopped, runSnoozed, runCancelled} {
		attrs := append(base[:len(base):len(base)], otelkeys.AttrOutcome.String(o))
		t.outcomes[o] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	}
	return t
}

// hold counts a task the worker holds and starts its process span, which
// the envelope keeps (its Context holds it), until release. (The task's
// goroutine starts with a small stack, and growing it costs a copy: what
// is added to process's frame sits under every call of the task.)
func (t *telemetry) hold(env *jobq.Envelope) {
	t.held.Add(1)
	hooks.StartSpan(context.Background(), env)
}

// release ends the process span and the count of a task.
func (t *telemetry) release(env *jobq.Envelope) {
	hooks.EndSpan(env)
	t.held.Add(-1)
}

// ran records a handler's run: its duration by outcome, and on the process
// span (in ctx, the task's context) the error of a failed one.
func (t *telemetry) ran(ctx context.Context, err, cause error, elapsed time.Duration) {
	outcome := runCompleted
	switch {
	case err == nil:
	case errors.Is(cause, errcode.LockLost):
		outcome = runLockLost
	case errors.Is(cause, errStopping):
		outcome = runStopped
	case errors.Is(cause, ErrCancelled):
		outcome = runCancelled
	case errors.Is(err, ErrSnoozed):
		outcome = runSnoozed
	default:
		outcome = runFailed
	}
	t.duration.Record(context.Background(), elapsed.Seconds(), t.outcomes[outcome]...)
	if err == nil {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(otelkeys.AttrOutcome.String(outcome))
		span.RecordError(err)
		if outcome == runFailed {
			span.SetStatus(codes.Error, err.Error())
		}
	}
}
