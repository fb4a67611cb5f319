package mem_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/benchkit"
)

// openBench opens a fresh mem queue, with query (say "?unsupported=results")
// after its name.
func openBench(b *testing.B, query ...string) *jobq.Queue {
	b.Helper()
	q, err := jobq.Open(context.Background(), "mem://bench-"+rand.Text()+strings.Join(query, ""))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Close() })
	return q
}

// BenchmarkPushReceiveComplete measures one task's whole trip through the
// portable layer and mem, one at a time.
func BenchmarkPushReceiveComplete(b *testing.B) {
	ctx := context.Background()
	q := openBench(b)
	for b.Loop() {
		if _, err := q.Push(ctx, &jobq.Task{Command: "true", ID: rand.Text()}); err != nil {
			b.Fatal(err)
		}
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Complete(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatch measures batches of 100: PushBatch, ReceiveBatch, and
// concurrent Completes (which the portable layer batches), with result
// records (the default) and without (unsupported=results), so that the
// records' cost shows.
func BenchmarkBatch(b *testing.B) {
	b.Run("records", func(b *testing.B) { benchBatch(b, openBench(b)) })
	b.Run("no-records", func(b *testing.B) { benchBatch(b, openBench(b, "?unsupported=results,cancel")) })
}

func benchBatch(b *testing.B, q *jobq.Queue) {
	ctx := context.Background()
	const n = 100
	for b.Loop() {
		ts := make([]*jobq.Task, n)
		for i := range ts {
			ts[i] = &jobq.Task{Command: "true", ID: rand.Text()}
		}
		if _, err := q.PushBatch(ctx, ts, jobq.PushOptions{}); err != nil {
			b.Fatal(err)
		}
		envs, err := q.ReceiveBatch(ctx, n, jobq.ReceiveOptions{Visibility: time.Minute})
		if err != nil || len(envs) != n {
			b.Fatalf("received %d of %d: %v", len(envs), n, err)
		}
		errs := make(chan error, n)
		for _, e := range envs {
			go func() { errs <- e.Complete(ctx) }()
		}
		for range n {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkDrain: a worker with 16 handlers running a no-op drains b.N
// tasks pushed before it starts. The engine is in the process and does
// little, so this is mostly the cost of the worker and the portable layer
// per task (run with -benchmem for its allocations).
func BenchmarkDrain(b *testing.B) {
	benchkit.Drain(b, benchkit.Open(b, "mem://bench-"+rand.Text()))
}

// BenchmarkEndToEnd is the engines' BenchmarkEndToEnd (a producer pushing
// in batches of 100 while a worker with 16 handlers runs no-op tasks) on
// mem: what the library itself costs a task, with no engine beside it.
func BenchmarkEndToEnd(b *testing.B) {
	benchkit.EndToEnd(b, openBench(b))
}

// BenchmarkEndToEndNoRecords is BenchmarkEndToEnd on a queue that keeps no
// result records (unsupported=results): mem keeps its records in the
// process's heap, so with records on the collector's work grows with the
// tasks run, and this figure is the library's own per-task cost.
func BenchmarkEndToEndNoRecords(b *testing.B) {
	benchkit.EndToEnd(b, openBench(b, "?unsupported=results"))
}
