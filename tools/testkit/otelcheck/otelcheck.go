// Package otelcheck runs a small worker on a real queue with in-memory
// OpenTelemetry providers and checks the spans and metrics jobq made: the
// producer→consumer link, the settlement spans under the process spans,
// and the counts. Each backend's tests call Run with its own queue URL.
package otelcheck

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// Providers are in-memory trace and metric providers whose data a test
// reads back.
type Providers struct {
	Spans  *tracetest.SpanRecorder
	Reader *sdkmetric.ManualReader
	TP     *sdktrace.TracerProvider
	MP     *sdkmetric.MeterProvider
}

// NewProviders returns in-memory providers, shut down after the test.
func NewProviders(t testing.TB) *Providers {
	p := &Providers{Spans: tracetest.NewSpanRecorder(), Reader: sdkmetric.NewManualReader()}
	p.TP = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.Spans))
	p.MP = sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.Reader))
	t.Cleanup(func() {
		_ = p.TP.Shutdown(context.Background())
		_ = p.MP.Shutdown(context.Background())
	})
	return p
}

// Metrics collects the current metric values.
func (p *Providers) Metrics(t testing.TB) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := p.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// Sum is the total of a counter's or up-down counter's points whose
// attributes include match.
func Sum(t testing.TB, ms map[string]metricdata.Aggregation, name string, match ...attribute.KeyValue) int64 {
	t.Helper()
	data, ok := ms[name]
	if !ok {
		t.Fatalf("metric %s was not recorded", name)
	}
	var total int64
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			if has(dp.Attributes, match) {
				total += dp.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			if has(dp.Attributes, match) {
				total += dp.Value
			}
		}
	default:
		t.Fatalf("metric %s is a %T, not an integer sum or gauge", name, data)
	}
	return total
}

// Count is how many values a histogram holds.
func Count(t testing.TB, ms map[string]metricdata.Aggregation, name string, match ...attribute.KeyValue) uint64 {
	t.Helper()
	h, ok := ms[name].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("metric %s is %T, not a float64 histogram", name, ms[name])
	}
	var n uint64
	for _, dp := range h.DataPoints {
		if has(dp.Attributes, match) {
			n += dp.Count
		}
	}
	return n
}

func has(set attribute.Set, match []attribute.KeyValue) bool {
	for _, kv := range match {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// Run pushes four tasks to the queue at rawURL, one at a time (one of them
// failing with no retries), runs a worker until the queue is empty, and
// checks the spans and the metrics. visibility is the worker's lease (0:
// its default), for backends with shorter ones.
func Run(t *testing.T, rawURL string, visibility time.Duration) {
	t.Helper()
	ctx := context.Background()
	p := NewProviders(t)
	q, err := jobq.OpenWithOptions(ctx, rawURL, jobq.Options{TracerProvider: p.TP, MeterProvider: p.MP})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer q.Close()

	want := []string{"ok-1", "ok-2", "ok-3", "bad"}
	parent := pushAll(ctx, t, q, p.TP, want)
	runWorker(ctx, t, q, visibility)

	sc := spanCheck{t: t, queue: q.Name(), want: want, byName: map[string][]sdktrace.ReadOnlySpan{}}
	sc.spans = p.Spans.Ended()
	for _, s := range sc.spans {
		sc.byName[s.Name()] = append(sc.byName[s.Name()], s)
	}
	pushOf := sc.checkPushes(parent)
	procOf := sc.checkProcesses(pushOf)
	sc.checkSettlements(procOf)
	checkMetrics(t, p, attribute.String("messaging.destination.name", q.Name()))
}

// pushAll pushes a task per id under an application's own span, which it
// returns ended.
func pushAll(ctx context.Context, t *testing.T, q *jobq.Queue, tp trace.TracerProvider, ids []string) trace.Span {
	t.Helper()
	pushCtx, parent := tp.Tracer("producer").Start(ctx, "request")
	for _, id := range ids {
		task := &jobq.Task{ID: id, Command: "echo " + id}
		if _, err := q.Push(pushCtx, task); err != nil {
			t.Fatalf("push %s: %v", id, err)
		}
	}
	parent.End()
	return parent
}

// runWorker runs a worker until the queue is empty; the task "bad" fails,
// and a handler's context without a span fails its task for good.
func runWorker(ctx context.Context, t *testing.T, q *jobq.Queue, visibility time.Duration) {
	t.Helper()
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return worker.Permanent(errors.New("the handler's context holds no span"))
		}
		if job.Task.ID == "bad" {
			return errors.New("this task fails")
		}
		return nil
	})
	if err := worker.Run(ctx, q, h, worker.Options{Concurrency: 2, Visibility: visibility}); err != nil {
		t.Fatalf("worker: %v", err)
	}
}

// spanCheck holds the ended spans of a Run, by name.
type spanCheck struct {
	t      *testing.T
	queue  string
	want   []string // the task IDs pushed
	spans  []sdktrace.ReadOnlySpan
	byName map[string][]sdktrace.ReadOnlySpan
}

func (c *spanCheck) named(op string) []sdktrace.ReadOnlySpan { return c.byName[op+" "+c.queue] }

// checkPushes checks a producer span per task under the application's
// parent span, and returns them by task ID.
func (c *spanCheck) checkPushes(parent trace.Span) map[string]sdktrace.ReadOnlySpan {
	t := c.t
	t.Helper()
	pushes := c.named("push")
	if len(pushes) != len(c.want) {
		t.Fatalf("%d push spans; want %d (spans: %v)", len(pushes), len(c.want), names(c.spans))
	}
	pushOf := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range pushes {
		checkKind(t, s, trace.SpanKindProducer)
		checkAttr(t, s, "messaging.system", "jobq")
		checkAttr(t, s, "messaging.operation.type", "send")
		checkAttr(t, s, "messaging.destination.name", c.queue)
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("push span's parent is %v; want the application's span %v", s.Parent().SpanID(), parent.SpanContext().SpanID())
		}
		pushOf[attr(s, "jobq.task.id")] = s
	}
	return pushOf
}

// checkProcesses checks a receive span and a consumer span per task, each
// linked to its push span, and returns the task ID of each process span.
func (c *spanCheck) checkProcesses(pushOf map[string]sdktrace.ReadOnlySpan) map[trace.SpanID]string {
	t := c.t
	t.Helper()
	if len(c.named("receive")) == 0 {
		t.Errorf("no receive span (spans: %v)", names(c.spans))
	}
	procs := c.named("process")
	if len(procs) != len(c.want) {
		t.Fatalf("%d process spans; want %d (spans: %v)", len(procs), len(c.want), names(c.spans))
	}
	procOf := map[trace.SpanID]string{}
	for _, s := range procs {
		checkKind(t, s, trace.SpanKindConsumer)
		checkAttr(t, s, "messaging.operation.type", "process")
		id := attr(s, "jobq.task.id")
		procOf[s.SpanContext().SpanID()] = id
		push, ok := pushOf[id]
		if !ok {
			t.Errorf("process span of task %q has no push span", id)
			continue
		}
		if !linksTo(s, push) {
			t.Errorf("process span of task %s does not link to its push span %v (links %v)", id, push.SpanContext().SpanID(), s.Links())
		}
	}
	return procOf
}

// linksTo reports whether s links to the span to. The link's context came
// over the wire: remote, unlike to's own, so only the IDs are compared.
func linksTo(s, to sdktrace.ReadOnlySpan) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == to.SpanContext().TraceID() && l.SpanContext.SpanID() == to.SpanContext().SpanID() {
			return true
		}
	}
	return false
}

// checkSettlements checks that each good task was completed and the bad one
// failed under its process span (its dead_letter under the fail span).
func (c *spanCheck) checkSettlements(procOf map[trace.SpanID]string) {
	t := c.t
	t.Helper()
	settled := map[string]string{} // task → settle operations under its process span
	for _, op := range []string{"complete", "fail", "dead_letter"} {
		for _, s := range c.named(op) {
			checkAttr(t, s, "messaging.operation.type", "settle")
			checkKind(t, s, trace.SpanKindClient)
			if id, ok := procOf[s.Parent().SpanID()]; ok {
				settled[id] += op + ";"
			} else if op != "dead_letter" {
				t.Errorf("%s span's parent %v is no process span", op, s.Parent().SpanID())
			}
		}
	}
	for _, id := range c.want[:3] {
		if settled[id] != "complete;" {
			t.Errorf("task %s: settlements under its process span %q; want complete", id, settled[id])
		}
	}
	if settled["bad"] != "fail;" {
		t.Errorf("task bad: settlements under its process span %q; want fail (its dead_letter under the fail span)", settled["bad"])
	}
}

// checkMetrics checks the counters, gauges and histograms of a Run on the
// queue dest names.
func checkMetrics(t *testing.T, p *Providers, dest attribute.KeyValue) {
	t.Helper()
	ms := p.Metrics(t)
	for _, c := range []struct {
		name  string
		match []attribute.KeyValue
		want  int64
	}{
		{"jobq.tasks.pushed", nil, 4},
		{"jobq.tasks.completed", nil, 3},
		{"jobq.tasks.failed", []attribute.KeyValue{attribute.Bool("jobq.retried", false)}, 1},
		{"jobq.tasks.dead_lettered", nil, 1},
		{"jobq.tasks.in_flight", nil, 0},
		{"jobq.queue.depth", []attribute.KeyValue{attribute.String("jobq.state", "ready")}, 0},
		{"jobq.queue.depth", []attribute.KeyValue{attribute.String("jobq.state", "dead")}, 1},
	} {
		if got := Sum(t, ms, c.name, append(c.match, dest)...); got != c.want {
			t.Errorf("%s %v = %d; want %d", c.name, c.match, got, c.want)
		}
	}
	if n := Count(t, ms, "jobq.task.duration", dest, attribute.String("jobq.outcome", "completed")); n != 3 {
		t.Errorf("jobq.task.duration holds %d completed runs; want 3", n)
	}
	if n := Count(t, ms, "jobq.task.duration", dest, attribute.String("jobq.outcome", "failed")); n != 1 {
		t.Errorf("jobq.task.duration holds %d failed runs; want 1", n)
	}
	if n := Count(t, ms, "jobq.task.queue_wait", dest); n != 4 {
		t.Errorf("jobq.task.queue_wait holds %d values; want 4 (one per first delivery)", n)
	}
}

func checkKind(t *testing.T, s sdktrace.ReadOnlySpan, kind trace.SpanKind) {
	t.Helper()
	if s.SpanKind() != kind {
		t.Errorf("span %s is of kind %v; want %v", s.Name(), s.SpanKind(), kind)
	}
}

func checkAttr(t *testing.T, s sdktrace.ReadOnlySpan, key, want string) {
	t.Helper()
	if got := attr(s, key); got != want {
		t.Errorf("span %s: %s = %q; want %q", s.Name(), key, got, want)
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// RunCancelled pushes one task to the queue at rawURL, cancels it while a
// worker runs it, and checks that the cancel counts neither as a completed
// task nor as a failed attempt: its run is timed under jobq.outcome
// cancelled, and its process span keeps status Unset.
func RunCancelled(t *testing.T, rawURL string) {
	t.Helper()
	ctx := context.Background()
	p := NewProviders(t)
	q, err := jobq.OpenWithOptions(ctx, rawURL, jobq.Options{TracerProvider: p.TP, MeterProvider: p.MP})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer q.Close()
	res, err := q.Push(ctx, &jobq.Task{ID: "cancelled", Command: "sleep 60", NumRetries: 3})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	started := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, _ *worker.Job) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	w := worker.New(q, h, worker.Options{Concurrency: 1, CancelPoll: 50 * time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	<-started
	if _, err := q.Admin().Cancel(ctx, res.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("worker: %v", err)
	}
	if c := w.Counts(); c.Cancelled != 1 {
		t.Fatalf("worker counts %+v; want one cancelled task", c)
	}
	dest := attribute.String("messaging.destination.name", q.Name())
	ms := p.Metrics(t)
	for _, name := range []string{"jobq.tasks.completed", "jobq.tasks.failed", "jobq.tasks.dead_lettered", "jobq.tasks.in_flight"} {
		if got := Sum(t, ms, name, dest); got != 0 {
			t.Errorf("%s = %d after a cancelled task; want 0", name, got)
		}
	}
	if got := Sum(t, ms, "jobq.tasks.pushed", dest); got != 1 {
		t.Errorf("jobq.tasks.pushed = %d; want 1", got)
	}
	for outcome, want := range map[string]uint64{"cancelled": 1, "failed": 0, "completed": 0} {
		if n := Count(t, ms, "jobq.task.duration", dest, attribute.String("jobq.outcome", outcome)); n != want {
			t.Errorf("jobq.task.duration holds %d %s runs; want %d", n, outcome, want)
		}
	}
	for _, s := range p.Spans.Ended() {
		if s.Name() != "process "+q.Name() {
			continue
		}
		if got := attr(s, "jobq.outcome"); got != "cancelled" || s.Status().Code != codes.Unset {
			t.Errorf("process span: jobq.outcome %q, status %v; want cancelled, Unset", got, s.Status().Code)
		}
	}
}
