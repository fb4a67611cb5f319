// Package promtext writes OpenTelemetry metric data in the Prometheus text
// exposition format (version 0.0.4), the format a Prometheus server scrapes.
//
// Names follow the OpenTelemetry-to-Prometheus conventions: characters
// Prometheus does not allow become "_", a unit of seconds or bytes adds
// "_seconds" or "_bytes" (units in braces, such as {task}, add nothing),
// and a monotonic sum is a counter with "_total". Attributes become labels
// the same way. Only what jobq records is supported: integer and float
// sums, gauges and explicit-bucket histograms, with cumulative temporality
// (a ManualReader's default).
package promtext

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// ContentType is the media type of the text format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// family is one metric family: its name, type, help and sample lines.
type family struct {
	name, typ, help string
	lines           []string
}

// Write writes rm in the text format. Metrics of the same name from
// different scopes are merged into one family; a later one whose type
// differs is left out.
func Write(w io.Writer, rm *metricdata.ResourceMetrics) error {
	fams := map[string]*family{}
	var order []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			f := convert(m)
			if f == nil {
				continue
			}
			if old, ok := fams[f.name]; ok {
				if old.typ == f.typ {
					old.lines = append(old.lines, f.lines...)
				}
				continue
			}
			fams[f.name] = f
			order = append(order, f.name)
		}
	}
	sort.Strings(order)
	bw := bufio.NewWriter(w)
	for _, name := range order {
		f := fams[name]
		if f.help != "" {
			fmt.Fprintf(bw, "# HELP %s %s\n", f.name, escapeHelp(f.help))
		}
		fmt.Fprintf(bw, "# TYPE %s %s\n", f.name, f.typ)
		for _, l := range f.lines {
			bw.WriteString(l)
		}
	}
	return bw.Flush()
}

// convert turns one metric into a family, nil for an aggregation the format
// cannot carry here (an exponential histogram, a delta sum).
func convert(m metricdata.Metrics) *family {
	base := Name(m.Name, m.Unit)
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		return sum(base, m.Description, d.IsMonotonic, d.Temporality, points(d.DataPoints))
	case metricdata.Sum[float64]:
		return sum(base, m.Description, d.IsMonotonic, d.Temporality, points(d.DataPoints))
	case metricdata.Gauge[int64]:
		return sample(base, "gauge", m.Description, points(d.DataPoints))
	case metricdata.Gauge[float64]:
		return sample(base, "gauge", m.Description, points(d.DataPoints))
	case metricdata.Histogram[int64]:
		return histogram(base, m.Description, d.Temporality, hpoints(d.DataPoints))
	case metricdata.Histogram[float64]:
		return histogram(base, m.Description, d.Temporality, hpoints(d.DataPoints))
	}
	return nil
}

type point struct {
	attrs attribute.Set
	value float64
}

func points[N int64 | float64](dps []metricdata.DataPoint[N]) []point {
	out := make([]point, len(dps))
	for i, dp := range dps {
		out[i] = point{dp.Attributes, float64(dp.Value)}
	}
	return out
}

type hpoint struct {
	attrs  attribute.Set
	bounds []float64
	counts []uint64
	count  uint64
	sum    float64
}

func hpoints[N int64 | float64](dps []metricdata.HistogramDataPoint[N]) []hpoint {
	out := make([]hpoint, len(dps))
	for i, dp := range dps {
		out[i] = hpoint{dp.Attributes, dp.Bounds, dp.BucketCounts, dp.Count, float64(dp.Sum)}
	}
	return out
}

func sum(name, help string, monotonic bool, tmp metricdata.Temporality, ps []point) *family {
	if tmp != metricdata.CumulativeTemporality {
		return nil
	}
	if !monotonic {
		return sample(name, "gauge", help, ps)
	}
	return sample(name+"_total", "counter", help, ps)
}

func sample(name, typ, help string, ps []point) *family {
	f := &family{name: name, typ: typ, help: help}
	for _, p := range ps {
		f.lines = append(f.lines, name+labels(p.attrs, "", "")+" "+formatFloat(p.value)+"\n")
	}
	return f
}

func histogram(name, help string, tmp metricdata.Temporality, ps []hpoint) *family {
	if tmp != metricdata.CumulativeTemporality {
		return nil
	}
	f := &family{name: name, typ: "histogram", help: help}
	for _, p := range ps {
		var cum uint64
		for i, b := range p.bounds {
			if i < len(p.counts) {
				cum += p.counts[i]
			}
			f.lines = append(f.lines, name+"_bucket"+labels(p.attrs, "le", formatFloat(b))+" "+strconv.FormatUint(cum, 10)+"\n")
		}
		f.lines = append(f.lines,
			name+"_bucket"+labels(p.attrs, "le", "+Inf")+" "+strconv.FormatUint(p.count, 10)+"\n",
			name+"_sum"+labels(p.attrs, "", "")+" "+formatFloat(p.sum)+"\n",
			name+"_count"+labels(p.attrs, "", "")+" "+strconv.FormatUint(p.count, 10)+"\n")
	}
	return f
}

// labels renders a label set, with one extra label (le) when extraKey is
// set. Attributes whose names collide once sanitized keep the first value.
func labels(set attribute.Set, extraKey, extraValue string) string {
	if set.Len() == 0 && extraKey == "" {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	seen := map[string]bool{}
	n := 0
	for iter := set.Iter(); iter.Next(); {
		kv := iter.Attribute()
		k := sanitize(string(kv.Key))
		if seen[k] || k == extraKey {
			continue
		}
		seen[k] = true
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.WriteString(k)
		b.WriteString(`="`)
		b.WriteString(escapeValue(kv.Value.String()))
		b.WriteByte('"')
	}
	if extraKey != "" {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(extraKey)
		b.WriteString(`="`)
		b.WriteString(extraValue)
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// Name is the Prometheus name of an OpenTelemetry metric with this unit.
func Name(name, unit string) string {
	n := sanitize(name)
	suffix := ""
	switch unit {
	case "s":
		suffix = "_seconds"
	case "ms":
		suffix = "_milliseconds"
	case "By":
		suffix = "_bytes"
	case "1":
		suffix = "_ratio"
	}
	if suffix != "" && !strings.HasSuffix(n, suffix) {
		n += suffix
	}
	return n
}

// sanitize replaces what a Prometheus metric or label name may not hold
// with "_", and prefixes one that starts with a digit.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	out := string(b)
	if out == "" || s[0] >= '0' && s[0] <= '9' {
		out = "_" + out
	}
	return out
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeValue(s string) string { return valueEscaper.Replace(s) }

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Collector is what Handler reads metrics from: a ManualReader.
type Collector interface {
	Collect(ctx context.Context, rm *metricdata.ResourceMetrics) error
}

// Handler serves the collector's metrics in the text format. A collection
// that fails in part (a callback such as the queue depth's could not reach
// the backend) still serves what was collected; onError, when not nil,
// hears of the failure.
func Handler(c Collector, onError func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rm metricdata.ResourceMetrics
		if err := c.Collect(r.Context(), &rm); err != nil && onError != nil {
			onError(err)
		}
		w.Header().Set("Content-Type", ContentType)
		if err := Write(w, &rm); err != nil && onError != nil {
			onError(err)
		}
	})
}
