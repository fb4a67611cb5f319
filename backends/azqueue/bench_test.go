package azqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// Benchmarks against Azurite (or the account in
// $JOBQ_TEST_AZQUEUE_CONNECTION_STRING). Run briefly:
//
//	go test ./backends/azqueue -run '^$' -bench . -benchtime 200x

func openBench(b *testing.B, params string) *jobq.Queue {
	b.Helper()
	u := newQueueURL(b) + params
	q, err := jobq.OpenWithOptions(context.Background(), u, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
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
		if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
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

// BenchmarkDrain empties a queue of 500 tasks with 8 receivers that take up
// to 32 messages per Get Messages and complete them (deletes are one
// request per message, sent 16 at a time by the portable layer's batching).
func BenchmarkDrain(b *testing.B) {
	const tasks, receivers = 500, 8
	q := openBench(b, "")
	ctx := context.Background()
	batch := make([]*jobq.Task, tasks)
	for b.Loop() {
		b.StopTimer()
		for i := range batch {
			batch[i] = &jobq.Task{Command: fmt.Sprintf("echo %d", i)}
		}
		if _, err := q.PushBatch(ctx, batch, jobq.PushOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var wg sync.WaitGroup
		var done atomic.Int64
		for range receivers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done.Load() < tasks {
					envs, err := q.ReceiveBatch(ctx, 32, jobq.ReceiveOptions{Visibility: time.Minute, Wait: time.Second})
					if err != nil {
						b.Error(err)
						return
					}
					for _, e := range envs {
						if err := e.Complete(ctx); err != nil {
							b.Error(err)
							return
						}
						done.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*tasks)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkWorkerDrain runs a worker (16 slots, a handler that does
// nothing) until it has emptied a queue of b.N tasks: receives, the
// settlement backlog's bounds and deletes together.
func BenchmarkWorkerDrain(b *testing.B) {
	q := openBench(b, "")
	ctx := context.Background()
	tasks := make([]*jobq.Task, b.N)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("true # %d", i)}
	}
	if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
		b.Fatal(err)
	}
	var ran atomic.Int64
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error { ran.Add(1); return nil })
	b.ResetTimer()
	start := time.Now()
	if err := worker.Run(ctx, q, h, worker.Options{Concurrency: 16, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(ran.Load())/time.Since(start).Seconds(), "tasks/s")
}
