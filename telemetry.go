package jobq

import (
	"context"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/internal/otelkeys"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// telemetry is a queue's tracer and instruments. With no provider
// installed they are OpenTelemetry's no-ops (through the global
// delegates, which pick up a provider installed later).
type telemetry struct {
	// global is true when the spans go to the global tracer provider
	// (Options.TracerProvider nil); tracing says whether one is installed.
	global bool
	tp     trace.TracerProvider
	mp     metric.MeterProvider
	tracer trace.Tracer
	base   []attribute.KeyValue // system, destination, backend
	names  map[string]string    // span name per operation name: "push queue"

	// The counters are kept here and reported at each collection
	// (observeCounts), so that a task costs atomic adds rather than calls
	// into the SDK on its goroutine.
	pushed, completed, dead, requeued, renewed, lost tally
	failedRetried, failedExhausted                   tally
	counters                                         map[*tally]metric.Int64ObservableCounter
	failed                                           metric.Int64ObservableCounter
	countsReg                                        metric.Registration
	queueWait                                        metric.Float64Histogram
	depth                                            metric.Int64ObservableGauge
	depthReg                                         metric.Registration
	observe                                          []metric.ObserveOption // base attributes
	observeRetried, observeExhausted                 []metric.ObserveOption

	add                              []metric.AddOption // base attributes
	record                           []metric.RecordOption
	ready, inFlight, delayed, deadSt []metric.ObserveOption
}

// baseAttributes returns the attributes every span and metric of the queue
// carries: messaging.system, messaging.destination.name and jobq.backend.
func (q *Queue) baseAttributes() []attribute.KeyValue {
	return append([]attribute.KeyValue(nil), q.tel.base...)
}

func newTelemetry(q *Queue, opts Options) *telemetry {
	t := &telemetry{tp: opts.TracerProvider, mp: opts.MeterProvider, global: opts.TracerProvider == nil}
	if t.tp == nil {
		t.tp = otel.GetTracerProvider()
	}
	if t.mp == nil {
		t.mp = otel.GetMeterProvider()
	}
	t.tracer = t.tp.Tracer(otelkeys.InstrumentationName, trace.WithSchemaURL(semconv.SchemaURL))
	t.base = []attribute.KeyValue{
		semconv.MessagingSystemKey.String(otelkeys.MessagingSystem),
		semconv.MessagingDestinationName(q.name),
		otelkeys.AttrBackend.String(q.scheme),
	}
	t.names = map[string]string{}
	for _, op := range []string{"push", "receive", "process", "complete", "requeue", "dead_letter", "fail"} {
		t.names[op] = op + " " + q.name
	}
	m := t.mp.Meter(otelkeys.InstrumentationName, metric.WithSchemaURL(semconv.SchemaURL))
	counter := func(name, desc, unit string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		if err != nil {
			q.log.Warn("jobq: could not create a metric", "metric", name, "error", err)
		}
		return c
	}
	t.counters = map[*tally]metric.Int64ObservableCounter{
		&t.pushed:    counter("jobq.tasks.pushed", "Tasks stored by a push (duplicates not counted).", "{task}"),
		&t.completed: counter("jobq.tasks.completed", "Tasks completed (deleted after success).", "{task}"),
		&t.dead:      counter("jobq.tasks.dead_lettered", "Tasks moved to the dead letters (failures, permanent failures, poison messages).", "{task}"),
		&t.requeued:  counter("jobq.tasks.requeued", "Tasks put back without using a retry (worker stopping, gate miss, policy limit).", "{task}"),
		&t.renewed:   counter("jobq.leases.renewed", "Lease renewals that succeeded.", "{lease}"),
		&t.lost:      counter("jobq.leases.lost", "Leases lost before the task was settled.", "{lease}"),
	}
	t.failed = counter("jobq.tasks.failed", "Failed attempts settled with Fail: retried (jobq.retried=true) or dead-lettered.", "{task}")
	var err error
	if t.queueWait, err = m.Float64Histogram("jobq.task.queue_wait", metric.WithUnit("s"),
		metric.WithDescription("Time from a task's push to its first delivery (a delayed task's delay included)."),
		metric.WithExplicitBucketBoundaries(otelkeys.DurationBuckets...)); err != nil {
		q.log.Warn("jobq: could not create a metric", "metric", "jobq.task.queue_wait", "error", err)
	}
	if t.depth, err = m.Int64ObservableGauge("jobq.queue.depth", metric.WithUnit("{task}"),
		metric.WithDescription("Messages in the queue by state (jobq.state: ready, in_flight, delayed, dead), read from the backend at each collection; only the counts the backend can measure.")); err != nil {
		q.log.Warn("jobq: could not create a metric", "metric", "jobq.queue.depth", "error", err)
	}
	set := attribute.NewSet(t.base...)
	t.add = []metric.AddOption{metric.WithAttributeSet(set)}
	t.record = []metric.RecordOption{metric.WithAttributeSet(set)}
	t.observe = []metric.ObserveOption{metric.WithAttributeSet(set)}
	t.observeRetried = []metric.ObserveOption{metric.WithAttributes(append(t.base[:len(t.base):len(t.base)], otelkeys.AttrRetried.Bool(true))...)}
	t.observeExhausted = []metric.ObserveOption{metric.WithAttributes(append(t.base[:len(t.base):len(t.base)], otelkeys.AttrRetried.Bool(false))...)}
	state := func(s string) []metric.ObserveOption {
		return []metric.ObserveOption{metric.WithAttributes(append(t.base[:len(t.base):len(t.base)], otelkeys.AttrState.String(s))...)}
	}
	t.ready, t.inFlight, t.delayed, t.deadSt = state("ready"), state("in_flight"), state("delayed"), state("dead")
	observed := []metric.Observable{t.failed}
	for _, c := range t.counters {
		observed = append(observed, c)
	}
	if t.countsReg, err = m.RegisterCallback(t.observeCounts, observed...); err != nil {
		q.log.Warn("jobq: could not register the task counters", "error", err)
	}
	if t.depth != nil {
		if t.depthReg, err = m.RegisterCallback(q.observeDepth, t.depth); err != nil {
			q.log.Warn("jobq: could not register the queue depth gauge", "error", err)
		}
	}
	return t
}

// depthTimeout bounds the backend's count at one collection of the depth
// gauge.
const depthTimeout = 10 * time.Second

// observeDepth reports the queue's counts for the depth gauge.
func (q *Queue) observeDepth(ctx context.Context, o metric.Observer) error {
	if q.closed.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, depthTimeout)
	defer cancel()
	st, err := q.drv.Stats(ctx)
	if err != nil {
		return q.wrap("stats", err)
	}
	t := q.tel
	for _, c := range []struct {
		known bool
		n     int64
		opts  []metric.ObserveOption
	}{{st.Known.Ready, st.Ready, t.ready}, {st.Known.InFlight, st.InFlight, t.inFlight}, {st.Known.Delayed, st.Delayed, t.delayed}, {st.Known.Dead, st.Dead, t.deadSt}} {
		if c.known {
			o.ObserveInt64(t.depth, c.n, c.opts...)
		}
	}
	return nil
}

// tally is a counter kept in the process and reported to OpenTelemetry as
// an observable counter at each collection: adding to it costs an atomic
// add. Its Add has the signature of metric.Int64Counter's.
type tally struct{ n atomic.Int64 }

// Add adds n; the context and options are not used (the attributes are
// the instrument's).
func (c *tally) Add(_ context.Context, n int64, _ ...metric.AddOption) { c.n.Add(n) }

// Load returns the count.
func (c *tally) Load() int64 { return c.n.Load() }

// observeCounts reports the counters.
func (t *telemetry) observeCounts(_ context.Context, o metric.Observer) error {
	for c, inst := range t.counters {
		o.ObserveInt64(inst, c.Load(), t.observe...)
	}
	o.ObserveInt64(t.failed, t.failedRetried.Load(), t.observeRetried...)
	o.ObserveInt64(t.failed, t.failedExhausted.Load(), t.observeExhausted...)
	return nil
}

// close unregisters the callbacks.
func (t *telemetry) close() {
	for _, r := range []metric.Registration{t.countsReg, t.depthReg} {
		if r != nil {
			_ = r.Unregister()
		}
	}
}

// unsetGlobal reports whether tp is OpenTelemetry's own global tracer
// provider, the one in place until a program installs one (after
// otel.SetTracerProvider, otel.GetTracerProvider returns the installed
// one). Its spans record nothing, so jobq skips them: starting one costs
// allocations on every task.
func unsetGlobal(tp trace.TracerProvider) bool {
	return reflect.TypeOf(tp).String() == "*global.tracerProvider"
}

// globalState is the last global tracer provider seen, and whether it was
// the unset one.
type globalState struct {
	tp    trace.TracerProvider
	unset bool
}

// lastGlobal caches unsetGlobal for the current global provider: reflect's
// type name is too deep a call for every task (it grows small goroutine
// stacks). Only providers of comparable types are cached, so comparing
// with it never panics.
var lastGlobal atomic.Pointer[globalState]

// globalUnset reports whether no global tracer provider is installed.
func globalUnset() bool {
	tp := otel.GetTracerProvider()
	if s := lastGlobal.Load(); s != nil && s.tp == tp {
		return s.unset
	}
	s := &globalState{tp: tp, unset: unsetGlobal(tp)}
	if reflect.TypeOf(tp).Comparable() {
		lastGlobal.Store(s)
	}
	return s.unset
}

// tracing reports whether spans may record: a tracer provider was passed
// in Options, or one is installed globally.
func (t *telemetry) tracing() bool {
	return !t.global || !globalUnset()
}

// start starts a span named for op on the queue, with the base attributes
// and opType; without a tracer provider it returns ctx and its span as
// they are.
func (t *telemetry) start(ctx context.Context, op string, kind trace.SpanKind, opType attribute.KeyValue, extra ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !t.tracing() {
		return ctx, trace.SpanFromContext(ctx)
	}
	opts := append([]trace.SpanStartOption{trace.WithSpanKind(kind)}, extra...)
	ctx, span := t.tracer.Start(ctx, t.names[op], opts...)
	if span.IsRecording() {
		span.SetAttributes(t.base...)
		span.SetAttributes(opType, semconv.MessagingOperationName(op))
	}
	return ctx, span
}

// end ends a span, recording err when there is one.
func end(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(errcode.Of(err).String()))
	}
	span.End()
}

// traceParent is the W3C traceparent of the span in ctx, or "" when ctx
// holds no valid span context: what a push stores with its messages.
func traceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// traceContext is the span context of a W3C traceparent, invalid when tp
// is empty or malformed.
func traceContext(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// noSpan is the span of what is not traced.
var noSpan trace.Span = noop.Span{}

// startPush starts a push's producer span and stamps every message with its
// trace context, so that the consumer's span links to it.
func (q *Queue) startPush(ctx context.Context, n int) (context.Context, trace.Span) {
	ctx, span := q.tel.start(ctx, "push", trace.SpanKindProducer, semconv.MessagingOperationTypeSend)
	if n > 1 && span.IsRecording() {
		span.SetAttributes(semconv.MessagingBatchMessageCount(n))
	}
	return ctx, span
}

// stampTrace sets the trace context of ctx on msgs.
func stampTrace(ctx context.Context, msgs []*driver.Message) {
	if tp := traceParent(ctx); tp != "" {
		for _, m := range msgs {
			m.TraceParent = tp
		}
	}
}

// endPush records a push's results on its span and the pushed counter.
func (q *Queue) endPush(ctx context.Context, span trace.Span, res []PushResult, err error) {
	stored := 0
	for _, r := range res {
		if !r.Duplicate {
			stored++
		}
	}
	if stored > 0 {
		q.tel.pushed.Add(ctx, int64(stored), q.tel.add...)
	}
	if len(res) == 1 && span.IsRecording() {
		span.SetAttributes(semconv.MessagingMessageID(res[0].MessageID), otelkeys.AttrTaskID.String(res[0].ID))
	}
	end(span, err)
}

// receiveSpan records a span for a receive that returned envs, started when
// the driver call that claimed them began, linked to each message's
// producer.
func (q *Queue) receiveSpan(ctx context.Context, began time.Time, envs []*Envelope) {
	if len(envs) == 0 || !q.tel.tracing() {
		return
	}
	links := make([]trace.Link, 0, len(envs))
	for _, e := range envs {
		if sc := traceContext(e.traceParent); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	_, span := q.tel.start(ctx, "receive", trace.SpanKindClient, semconv.MessagingOperationTypeReceive,
		trace.WithTimestamp(began), trace.WithLinks(links...))
	if span.IsRecording() {
		if len(envs) > 1 {
			span.SetAttributes(semconv.MessagingBatchMessageCount(len(envs)))
		} else {
			span.SetAttributes(semconv.MessagingMessageID(envs[0].MessageID), otelkeys.AttrTaskID.String(envs[0].Task.ID))
		}
	}
	span.End()
}

// observeWait records the queue wait of first deliveries.
func (q *Queue) observeWait(ctx context.Context, envs []*Envelope) {
	now := time.Now()
	for _, e := range envs {
		if e.DeliveryCount == 1 && !e.EnqueuedAt.IsZero() {
			q.tel.queueWait.Record(ctx, max(now.Sub(e.EnqueuedAt), 0).Seconds(), q.tel.record...)
		}
	}
}

// producerSpanContext returns the span context of the push that queued the
// message, when its trace context travelled with it (docs/observability.md
// says on which backends it does); invalid otherwise.
func (e *Envelope) producerSpanContext() trace.SpanContext { return traceContext(e.traceParent) }

// startSpan starts the consumer's "process" span of this message, following
// OpenTelemetry's messaging conventions: kind Consumer, a child of the span
// in ctx, linked to the producer's span when its trace context travelled
// with the message. The settlements of the envelope made with a context
// that holds no span become its children. The caller ends the span after
// settling (span.End, or EndSpan). The envelope keeps the span: Context
// returns contexts that hold it (unless their parent holds a span). The
// worker calls it for every task it runs. When no tracer provider was
// installed as the message was received, it returns ctx and a no-op span.
func (e *Envelope) startSpan(ctx context.Context) (context.Context, trace.Span) {
	if !e.traced {
		return ctx, noSpan
	}
	var extra []trace.SpanStartOption
	if sc := e.producerSpanContext(); sc.IsValid() {
		extra = append(extra, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := e.q.tel.start(ctx, "process", trace.SpanKindConsumer, semconv.MessagingOperationTypeProcess, extra...)
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingMessageID(e.MessageID), otelkeys.AttrTaskID.String(e.Task.ID),
			otelkeys.AttrDeliveryCount.Int(e.DeliveryCount))
		e.mu.Lock()
		e.span = span
		e.mu.Unlock()
	}
	return ctx, span
}

// withSpan returns parent holding the process span StartSpan started,
// when it started one that records and parent holds no span.
func (e *Envelope) withSpan(parent context.Context) context.Context {
	e.mu.Lock()
	span := e.span
	e.mu.Unlock()
	if span == nil || trace.SpanContextFromContext(parent).IsValid() {
		return parent
	}
	return trace.ContextWithSpan(parent, span)
}

// endSpan ends the process span StartSpan started, if it started one that
// records; it does nothing otherwise.
func (e *Envelope) endSpan() {
	e.mu.Lock()
	span := e.span
	e.mu.Unlock()
	if span != nil {
		span.End()
	}
}

// startSettle starts a settlement's span: a child of the span in ctx, or
// else of the envelope's process span (StartSpan).
func (e *Envelope) startSettle(ctx context.Context, op string) (context.Context, trace.Span) {
	// The check is a field: the settlement runs on the task's goroutine,
	// whose stack a deeper call here would make grow on every task.
	if !e.traced {
		return ctx, noSpan
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		e.mu.Lock()
		span := e.span
		e.mu.Unlock()
		if span != nil {
			ctx = trace.ContextWithSpan(ctx, span)
		}
	}
	ctx, span := e.q.tel.start(ctx, op, trace.SpanKindClient, semconv.MessagingOperationTypeSettle)
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingMessageID(e.MessageID), otelkeys.AttrTaskID.String(e.Task.ID))
	}
	return ctx, span
}

// settleSpanKey marks a context that is inside an envelope's settlement
// span (completeTraced).
type settleSpanKey struct{}

// inSettleSpan reports whether ctx is inside e's settlement span.
func inSettleSpan(ctx context.Context, e *Envelope) bool {
	return ctx.Value(settleSpanKey{}) == e
}

// completeTraced runs Complete in its settlement span. Complete calls it
// only when tracing, so that its untraced path, on the task's goroutine,
// keeps a small stack frame (a goroutine whose stack must grow pays for a
// copy of it). Complete counts the completion itself.
func (e *Envelope) completeTraced(ctx context.Context) error {
	ctx, span := e.startSettle(ctx, "complete")
	err := e.Complete(context.WithValue(ctx, settleSpanKey{}, e))
	end(span, err)
	return err
}

// endSettle ends a settlement's span and counts it when it succeeded.
func (e *Envelope) endSettle(ctx context.Context, span trace.Span, op string, err *error) {
	end(span, *err)
	if *err != nil {
		return
	}
	t := e.q.tel
	switch op {
	case "requeue":
		t.requeued.Add(ctx, 1, t.add...)
	case "dead_letter":
		t.dead.Add(ctx, 1, t.add...)
	}
}

// countFail counts a failed attempt that Fail settled.
func (e *Envelope) countFail(ctx context.Context, res FailResult, err error) {
	if err != nil {
		return
	}
	t := e.q.tel
	if res.Retried {
		t.failedRetried.Add(ctx, 1)
	} else {
		t.failedExhausted.Add(ctx, 1)
	}
}
