package azqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// Benchmarks against Azurite (or the account in
// $JOBQ_TEST_AZQUEUE_CONNECTION_STRING). Figures are in
// docs/backends/azqueue.md. Run briefly:
//
//	go test ./backends/azqueue -run '^$' -bench . -benchtime 200x

func openBench(b *testing.B, params string) *jobq.Queue {
	b.Helper()
	u := newQueueURL(b) + params
	q, err := jobq.OpenWithOptions(context.Background(), u, jobq.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q
}

// BenchmarkPushReceiveComplete is one task's round trip from one goroutine:
// Put Message, Get Messages, Delete Message.
func BenchmarkPushReceiveComplete(b *testing.B) {
	q := openBench(b, "")
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if _, err := q.Push(ctx, &jobq.Task{Command: fmt.Sprintf("echo %d", i)}); err != nil {
			b.Fatal(err)
		}
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Complete(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPushBatch pushes 100 tasks per PushBatch (sent 16 at a time).
func BenchmarkPushBatch(b *testing.B) {
	q := openBench(b, "")
	ctx := context.Background()
	tasks := make([]*jobq.Task, 100)
	for b.Loop() {
		for i := range tasks {
			tasks[i] = &jobq.Task{Command: fmt.Sprintf("echo %d", i)}
		}
		if _, err := q.PushBatch(ctx, tasks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(tasks))/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkPickupLatency measures how long a task pushed to an idle queue
// waits before a receiver that has been polling it gets it: the polling
// backoff's cost. Sub-benchmarks use the default poll_max=500ms and a tighter
// one.
func BenchmarkPickupLatency(b *testing.B) {
	for _, params := range []string{"", "?poll_max=250ms"} {
		name := "default"
		if params != "" {
			name = params[1:]
		}
		b.Run(name, func(b *testing.B) {
			q := openBench(b, params)
			ctx := context.Background()
			var total time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				got := make(chan time.Time, 1)
				go func() {
					e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: time.Minute})
					if err != nil {
						b.Error(err)
						got <- time.Time{}
						return
					}
					got <- time.Now()
					_ = e.Complete(ctx)
				}()
				// Let the receiver back off to its idle pace first.
				time.Sleep(3 * time.Second)
				b.StartTimer()
				pushed := time.Now()
				if _, err := q.Push(ctx, &jobq.Task{Command: fmt.Sprintf("echo %d", i)}); err != nil {
					b.Fatal(err)
				}
				total += (<-got).Sub(pushed)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/pickup")
		})
	}
}
