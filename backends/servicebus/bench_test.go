package servicebus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// The benchmarks run against the emulator (or the namespace in
// $JOBQ_TEST_SERVICEBUS_CONNECTION_STRING) through the portable API:
//
//	go test -run '^$' -bench . -benchtime 2000x ./backends/servicebus/
//
// Each reports tasks/s. On the emulator they measure the driver and the
// SDK more than Service Bus, whose latency per round trip is higher.

func openBench(b *testing.B) *jobq.Queue {
	b.Helper()
	q, err := jobq.OpenWithOptions(context.Background(), newQueueURL(b), jobq.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Close() })
	return q
}

func benchTasks(n int) []*jobq.Task {
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	return tasks
}

// BenchmarkPushBatch pushes b.N tasks in batches of 100.
func BenchmarkPushBatch(b *testing.B) {
	q := openBench(b)
	tasks := benchTasks(b.N)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < len(tasks); i += 100 {
		if _, err := q.PushBatch(ctx, tasks[i:min(i+100, len(tasks))]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
}

// BenchmarkReceiveComplete receives b.N pushed tasks in batches of 32 and
// completes each one.
func BenchmarkReceiveComplete(b *testing.B) {
	q := openBench(b)
	ctx := context.Background()
	tasks := benchTasks(b.N)
	for i := 0; i < len(tasks); i += 100 {
		if _, err := q.PushBatch(ctx, tasks[i:min(i+100, len(tasks))]); err != nil {
			b.Fatal(err)
		}
	}
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
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
}
