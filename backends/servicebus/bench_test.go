package servicebus_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/benchkit"
)

// The benchmarks run against the emulator (or the namespace in
// $JOBQ_TEST_SERVICEBUS_CONNECTION_STRING) through the portable API:
//
//	go test -run '^$' -bench . -benchtime 2000x ./backends/servicebus/
//
// Each reports tasks/s. On the emulator they measure the driver and the
// SDK more than Service Bus, whose latency per round trip is higher.

// openBench opens a fresh queue on the emulator or namespace, closed after
// the benchmark.
func openBench(b *testing.B) *jobq.Queue {
	b.Helper()
	return benchkit.Open(b, newQueueURL(b))
}

// BenchmarkPushBatch pushes b.N tasks in batches of 100.
func BenchmarkPushBatch(b *testing.B) {
	benchkit.PushBatch(b, openBench(b), 100, 1)
}

// BenchmarkReceiveComplete receives b.N pushed tasks in batches of 32 and
// completes each one.
func BenchmarkReceiveComplete(b *testing.B) {
	q := openBench(b)
	ctx := context.Background()
	benchkit.Push(b, q, benchkit.Tasks(b.N), 100)
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		envs, err := q.ReceiveBatch(ctx, 32, jobq.ReceiveOptions{Wait: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if len(envs) == 0 {
			b.Fatalf("queue empty after %d of %d tasks", done, b.N)
		}
		for _, e := range envs {
			if err := e.Complete(ctx); err != nil {
				b.Fatal(err)
			}
		}
		done += len(envs)
	}
	benchkit.ReportRate(b, b.N, time.Since(start))
}
