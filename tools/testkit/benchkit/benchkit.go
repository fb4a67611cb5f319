// Package benchkit holds the benchmark harness the backends share: opening a
// queue for a benchmark, building tasks, the push, drain, end-to-end,
// pickup-latency and policy-drain drivers, and the reporting of tasks/s and
// latency percentiles. Each backend keeps its own benchmark functions (their
// names are quoted in the docs) and calls into this package for the body;
// what is specific to a backend (raw engine limits, comparisons with other
// libraries) stays in the backend.
package benchkit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// Handlers is how many tasks the benchmark worker runs at once, and how many
// goroutines the parallel claim loops use.
const Handlers = 16

// WorkerHandlers is how many handlers the benchmark worker runs: Handlers,
// or $JOBQ_BENCH_HANDLERS when set to a positive number (the issues ask for
// "16 or more"; more handlers mean larger claims).
func WorkerHandlers() int {
	if n, err := strconv.Atoi(os.Getenv("JOBQ_BENCH_HANDLERS")); err == nil && n > 0 {
		return n
	}
	return Handlers
}

// envInt is the non-zero integer in the environment variable name, or def
// (a negative JOBQ_BENCH_PREFETCH turns prefetch off).
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n != 0 {
		return n
	}
	return def
}

// Open opens the queue at url through the portable API with a discarding
// logger (and, with $JOBQ_BENCH_METRICS=prometheus, a served and scraped
// metrics SDK), failing the benchmark on error, and closes it when the
// benchmark ends.
func Open(b *testing.B, url string) *jobq.Queue {
	b.Helper()
	opts := jobq.Options{Logger: slog.New(slog.DiscardHandler)}
	withMetrics(b, &opts) // $JOBQ_BENCH_METRICS (metrics.go)
	q, err := jobq.OpenWithOptions(context.Background(), url, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Close() })
	return q
}

// Tasks returns n small tasks whose payloads are {"n": i}.
func Tasks(n int) []*jobq.Task {
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	return tasks
}

// ReportRate reports n tasks over d as the benchmark's tasks/s metric.
func ReportRate(b *testing.B, n int, d time.Duration) {
	b.ReportMetric(float64(n)/d.Seconds(), "tasks/s")
}

// noop is the benchmark worker's handler: it measures the queue, not work.
var noop = worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })

// newWorker returns a silent worker with Handlers handlers running noop;
// wait says whether it keeps waiting on an empty queue or exits.
func newWorker(q *jobq.Queue, wait bool) *worker.Worker {
	return worker.New(q, noop, worker.Options{Concurrency: WorkerHandlers(), Wait: wait,
		Prefetch: envInt("JOBQ_BENCH_PREFETCH", 0), Receivers: envInt("JOBQ_BENCH_RECEIVERS", 0), StatusInterval: -1, Logger: slog.New(slog.DiscardHandler)})
}
