package cli_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
)

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// scrape reads the endpoint once and parses it with Prometheus's parser;
// nil while the endpoint is not up yet.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET %s: %s, Content-Type %q:\n%s", url, resp.Status, resp.Header.Get("Content-Type"), body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus's parser refused the endpoint's output: %v\n%s", err, body)
	}
	return fams
}

func value(f *dto.MetricFamily, labels map[string]string) (float64, bool) {
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == k && l.GetValue() == v
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsEndpoint runs `jobq QUEUE worker --wait --metrics-addr` on
// three pushed tasks, scrapes the endpoint until it reports them done, and
// checks the counts Prometheus's parser reads.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	for _, c := range []string{"echo 1", "echo 2", "exit 3"} {
		if code, _, stderr := run(t, q, "push", "-c", c, "--num-retries", "0"); code != 0 {
			t.Fatalf("push: exit %d: %s", code, stderr)
		}
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{q, "worker", "--wait", "--max-consecutive-failures", "-1", "--metrics-addr", addr},
			strings.NewReader(""), io.Discard, &stderr)
	}()

	url := "http://" + addr + "/metrics"
	dest := map[string]string{"messaging_destination_name": "policies", "messaging_system": "jobq", "jobq_backend": "sqlite"}
	var fams map[string]*dto.MetricFamily
	// Wait (bounded, in case the worker never gets there) until the worker
	// has settled the three tasks: two completed, one dead-lettered.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case code := <-done:
			t.Fatalf("worker exited %d before the tasks were done:\n%s", code, stderr.String())
		default:
		}
		fams = scrape(t, url)
		completed, _ := value(fams["jobq_tasks_completed_total"], dest)
		dead, _ := value(fams["jobq_tasks_dead_lettered_total"], dest)
		running, _ := value(fams["jobq_tasks_in_flight"], dest)
		if completed == 2 && dead == 1 && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the endpoint never reported the tasks done; last scrape %v\nworker log:\n%s", fams, stderr.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("worker exited %d after its context ended:\n%s", code, stderr.String())
	}

	tests := []struct {
		family string
		typ    dto.MetricType
		labels map[string]string
		want   float64
	}{
		{"jobq_tasks_completed_total", dto.MetricType_COUNTER, dest, 2},
		{"jobq_tasks_dead_lettered_total", dto.MetricType_COUNTER, dest, 1},
		{"jobq_tasks_failed_total", dto.MetricType_COUNTER, map[string]string{"jobq_retried": "false"}, 1},
		{"jobq_task_duration_seconds", dto.MetricType_HISTOGRAM, map[string]string{"jobq_outcome": "completed"}, 2},
		{"jobq_task_queue_wait_seconds", dto.MetricType_HISTOGRAM, dest, 3},
		{"jobq_tasks_in_flight", dto.MetricType_GAUGE, dest, 0},
		{"jobq_queue_depth", dto.MetricType_GAUGE, map[string]string{"jobq_state": "ready"}, 0},
		{"jobq_queue_depth", dto.MetricType_GAUGE, map[string]string{"jobq_state": "dead"}, 1},
	}
	for _, tt := range tests {
		f, ok := fams[tt.family]
		if !ok {
			t.Errorf("no %s in the scrape", tt.family)
			continue
		}
		if f.GetType() != tt.typ {
			t.Errorf("%s is a %v; want %v", tt.family, f.GetType(), tt.typ)
		}
		if got, ok := value(f, tt.labels); !ok || got != tt.want {
			t.Errorf("%s%v = %v (found %v); want %v", tt.family, tt.labels, got, ok, tt.want)
		}
	}
}

// TestMetricsAddrChecked: the endpoint has no authentication, so an
// address off loopback needs --metrics-public, and a malformed one is a
// usage error.
func TestMetricsAddrChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-addr", "0.0.0.0:9464"}, "not a loopback address"},
		{[]string{"--metrics-addr", ":9464"}, "not a loopback address"},
		{[]string{"--metrics-addr", "192.0.2.1:9464"}, "--metrics-public"},
		{[]string{"--metrics-addr", "9464"}, "give host:port"},
	}
	for _, tt := range tests {
		code, _, stderr := run(t, append([]string{sqliteQueue(t), "worker"}, tt.args...)...)
		if code != cli.ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("worker %v: exit %d, %q; want exit %d naming %q", tt.args, code, stderr, cli.ExitUsage, tt.want)
		}
	}
}
