package statsreport_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/statsreport"
)

// TestReportFields pins the stats document's field names and null rules:
// autoscalers are configured with them.
func TestReportFields(t *testing.T) {
	t.Parallel()
	known := driver.Stats{Ready: 3, InFlight: 2, Delayed: 1, Dead: 4, Known: driver.KnownCounts{Ready: true, InFlight: true, Delayed: true, Dead: true}}
	noInFlight := known
	noInFlight.Known.InFlight = false
	keys := &statsreport.Keys{
		Policies: []driver.Policy{{Kind: driver.MaxDepthPolicy, Limit: 100}, {Kind: driver.RatePolicy, Key: "api", Limit: 10, Period: time.Minute}},
		Stats:    []driver.KeyStat{{Kind: driver.RatePolicy, Key: "api", Admitted: 10, Waiting: 15}},
	}
	tests := []struct {
		name   string
		report statsreport.Report
		want   string // the JSON document
	}{
		{"counts only", statsreport.Report{Stats: known},
			`{"dead_lettered":4,"delayed":1,"in_flight":2,"ready":3,"size":6}`},
		{"unknown in-flight", statsreport.Report{Stats: noInFlight},
			`{"dead_lettered":4,"delayed":1,"in_flight":null,"ready":3,"size":null}`},
		{"drain measured", statsreport.Report{Stats: known, Drain: &statsreport.Drain{Rate: 2, ETA: 3 * time.Second, Known: true}},
			`{"dead_lettered":4,"delayed":1,"drain_eta_s":3,"drain_rate_per_s":2,"in_flight":2,"new_task_wait_s":1.5,"ready":3,"size":6}`},
		{"drain unknown", statsreport.Report{Stats: known, Drain: &statsreport.Drain{Rate: -1}},
			`{"dead_lettered":4,"delayed":1,"drain_eta_s":null,"drain_rate_per_s":-1,"in_flight":2,"new_task_wait_s":null,"ready":3,"size":6}`},
		{"keys and max depth", statsreport.Report{Stats: known, Keys: keys},
			`{"dead_lettered":4,"delayed":1,"in_flight":2,"keys":[{"kind":"rate","key":"api","limit":10,"period_s":60,"in_flight":0,"admitted_in_window":10,"waiting":15,"rate_wait_s":120}],"max_depth":100,"ready":3,"size":6}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tt.report)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestFieldConstants checks that the Field constants name every top-level
// field a full document has, and nothing else.
func TestFieldConstants(t *testing.T) {
	t.Parallel()
	full := statsreport.Report{
		Stats: driver.Stats{Known: driver.KnownCounts{Ready: true, InFlight: true, Delayed: true, Dead: true}},
		Drain: &statsreport.Drain{Rate: 1},
		Keys:  &statsreport.Keys{Policies: []driver.Policy{{Kind: driver.MaxDepthPolicy, Limit: 5}}},
	}
	var got []string
	for k := range full.Map() {
		got = append(got, k)
	}
	want := []string{statsreport.FieldReady, statsreport.FieldInFlight, statsreport.FieldDelayed, statsreport.FieldDeadLettered,
		statsreport.FieldSize, statsreport.FieldDrainRate, statsreport.FieldDrainETA, statsreport.FieldNewTaskWait,
		statsreport.FieldKeys, statsreport.FieldMaxDepth}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("fields %v; want %v", got, want)
	}
}

func TestEstimate(t *testing.T) {
	t.Parallel()
	st := func(ready, inFlight, delayed int64) driver.Stats {
		return driver.Stats{Ready: ready, InFlight: inFlight, Delayed: delayed}
	}
	tests := []struct {
		name          string
		first, second driver.Stats
		elapsed       time.Duration
		want          *statsreport.Drain
	}{
		{"draining", st(100, 10, 0), st(80, 10, 0), 10 * time.Second, &statsreport.Drain{Rate: 2, ETA: 45 * time.Second, Known: true}},
		{"empty", st(5, 0, 0), st(0, 0, 0), time.Second, &statsreport.Drain{Rate: 5, Known: true}},
		{"growing", st(5, 0, 0), st(10, 0, 0), 5 * time.Second, &statsreport.Drain{Rate: -1}},
		{"no time", st(5, 0, 0), st(5, 0, 0), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := statsreport.Estimate(tt.first, tt.second, tt.elapsed)
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("Estimate = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// TestDocumentedFields checks that docs/autoscaling.md's tables describe
// every field of the document.
func TestDocumentedFields(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	for _, f := range []string{statsreport.FieldReady, statsreport.FieldInFlight, statsreport.FieldDelayed, statsreport.FieldDeadLettered,
		statsreport.FieldSize, statsreport.FieldDrainRate, statsreport.FieldDrainETA, statsreport.FieldNewTaskWait,
		statsreport.FieldKeys, statsreport.FieldMaxDepth,
		"kind", "key", "limit", "period_s", "in_flight", "admitted_in_window", "waiting", "rate_wait_s"} {
		if !strings.Contains(doc, "| `"+f+"` |") {
			t.Errorf("docs/autoscaling.md has no table row for the field %q", f)
		}
	}
}
