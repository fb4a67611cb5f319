package promtext_test

import (
	"bytes"
	"context"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/jobq/jobq/internal/promtext"
)

// Parse parses the text format with Prometheus's own parser.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("Prometheus's parser refused the output: %v\n%s", err, text)
	}
	return fams
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestWrite records one of each instrument jobq uses, with awkward label
// values, and checks what Prometheus's parser reads back.
func TestWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	m := mp.Meter("test")
	odd := attribute.String("messaging.destination.name", "q \"1\"\\\nx")
	c, _ := m.Int64Counter("jobq.tasks.completed", metric.WithUnit("{task}"), metric.WithDescription("Tasks completed.\nSecond line \\ here."))
	c.Add(ctx, 3, metric.WithAttributes(odd))
	c.Add(ctx, 2, metric.WithAttributes(attribute.String("messaging.destination.name", "other")))
	u, _ := m.Int64UpDownCounter("jobq.tasks.in_flight", metric.WithUnit("{task}"))
	u.Add(ctx, 5)
	u.Add(ctx, -2)
	h, _ := m.Float64Histogram("jobq.task.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.1, 1, 10))
	for _, v := range []float64{0.05, 0.5, 0.7, 20} {
		h.Record(ctx, v, metric.WithAttributes(attribute.Bool("jobq.retried", true)))
	}
	g, _ := m.Int64ObservableGauge("jobq.queue.depth", metric.WithUnit("{task}"))
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, 7, metric.WithAttributes(attribute.String("jobq.state", "ready")))
		return nil
	}, g)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := promtext.Write(&buf, &rm); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, buf.Bytes())

	tests := []struct {
		family string
		typ    dto.MetricType
	}{
		{"jobq_tasks_completed_total", dto.MetricType_COUNTER},
		{"jobq_tasks_in_flight", dto.MetricType_GAUGE},
		{"jobq_task_duration_seconds", dto.MetricType_HISTOGRAM},
		{"jobq_queue_depth", dto.MetricType_GAUGE},
	}
	for _, tt := range tests {
		f, ok := fams[tt.family]
		if !ok {
			t.Fatalf("no family %s in\n%s", tt.family, buf.String())
		}
		if f.GetType() != tt.typ {
			t.Errorf("%s is a %v; want %v", tt.family, f.GetType(), tt.typ)
		}
	}
	got := map[string]float64{}
	for _, m := range fams["jobq_tasks_completed_total"].GetMetric() {
		got[label(m, "messaging_destination_name")] = m.GetCounter().GetValue()
	}
	if got[odd.Value.AsString()] != 3 || got["other"] != 2 {
		t.Errorf("counter values by destination %v; want 3 for %q and 2 for other", got, odd.Value.AsString())
	}
	if h := fams["jobq_tasks_completed_total"].GetHelp(); h != "Tasks completed.\nSecond line \\ here." {
		t.Errorf("help %q does not round-trip", h)
	}
	if v := fams["jobq_tasks_in_flight"].GetMetric()[0].GetGauge().GetValue(); v != 3 {
		t.Errorf("in flight %v; want 3", v)
	}
	hist := fams["jobq_task_duration_seconds"].GetMetric()[0].GetHistogram()
	if hist.GetSampleCount() != 4 || hist.GetSampleSum() != 21.25 {
		t.Errorf("histogram count %d sum %v; want 4 and 21.25", hist.GetSampleCount(), hist.GetSampleSum())
	}
	wantCum := map[float64]uint64{0.1: 1, 1: 3, 10: 3}
	for _, b := range hist.GetBucket() {
		if w, ok := wantCum[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%v holds %d; want %d (cumulative)", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
	if l := label(fams["jobq_task_duration_seconds"].GetMetric()[0], "jobq_retried"); l != "true" {
		t.Errorf("jobq_retried label %q; want true", l)
	}
	if m := fams["jobq_queue_depth"].GetMetric()[0]; m.GetGauge().GetValue() != 7 || label(m, "jobq_state") != "ready" {
		t.Errorf("depth %v %v; want 7 ready", m.GetGauge().GetValue(), m.GetLabel())
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, unit, want string }{
		{"jobq.task.duration", "s", "jobq_task_duration_seconds"},
		{"jobq.tasks.pushed", "{task}", "jobq_tasks_pushed"},
		{"already_seconds", "s", "already_seconds"},
		{"size", "By", "size_bytes"},
		{"9lives-x", "", "_9lives_x"},
	}
	for _, tt := range tests {
		if got := promtext.Name(tt.name, tt.unit); got != tt.want {
			t.Errorf("Name(%q, %q) = %q; want %q", tt.name, tt.unit, got, tt.want)
		}
	}
}
