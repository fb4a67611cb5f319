package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
)

// The benchmarks go through *jobq.Queue, the path users take. Each reports
// tasks/s; a task is a no-op shell task with a unique command.

func openBenchQueue(b *testing.B) *jobq.Queue {
	b.Helper()
	q, err := jobq.Open(b.Context(), "sqlite://"+filepath.Join(b.TempDir(), "bench.db")+"?queue=bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Close() })
	return q
}

func benchTask(i int) *jobq.Task { return &jobq.Task{Command: fmt.Sprintf("true %d", i)} }

func reportRate(b *testing.B, tasks int) {
	b.ReportMetric(float64(tasks)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkPush: one producer, one task per call.
func BenchmarkPush(b *testing.B) {
	q := openBenchQueue(b)
	ctx := b.Context()
	i := 0
	for b.Loop() {
		if _, err := q.Push(ctx, benchTask(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportRate(b, i)
}

const benchBatch = 100

// BenchmarkPushBatch: one producer, 100 tasks per call (one transaction).
func BenchmarkPushBatch(b *testing.B) {
	q := openBenchQueue(b)
	ctx := b.Context()
	n := 0
	for b.Loop() {
		tasks := make([]*jobq.Task, benchBatch)
		for j := range tasks {
			tasks[j] = benchTask(n + j)
		}
		if _, err := q.PushBatch(ctx, tasks); err != nil {
			b.Fatal(err)
		}
		n += benchBatch
	}
	reportRate(b, n)
}

// BenchmarkReceiveComplete: one consumer, Receive then Complete, on a queue
// filled beforehand.
func BenchmarkReceiveComplete(b *testing.B) {
	q := openBenchQueue(b)
	ctx := b.Context()
	fill(b, q, b.N)
	b.ResetTimer()
	for range b.N {
		env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if err := env.Complete(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, b.N)
}

// BenchmarkEndToEnd: one producer pushes batches of 100 while 4 consumers
// receive (one message per call) and complete; the clock stops when every
// task is completed.
func BenchmarkEndToEnd(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) {
			q := openBenchQueue(b)
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			total := int64(b.N)
			var done atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			wg.Go(func() {
				for i := 0; i < int(total); i += benchBatch {
					tasks := make([]*jobq.Task, 0, benchBatch)
					for j := i; j < min(i+benchBatch, int(total)); j++ {
						tasks = append(tasks, benchTask(j))
					}
					if _, err := q.PushBatch(ctx, tasks); err != nil {
						b.Error(err)
						return
					}
				}
			})
			for range consumers {
				wg.Go(func() {
					for done.Load() < total {
						env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 100 * time.Millisecond})
						if errors.Is(err, jobq.ErrEmpty) {
							continue
						}
						if err != nil {
							if ctx.Err() == nil {
								b.Error(err)
							}
							return
						}
						if err := env.Complete(ctx); err != nil {
							b.Error(err)
							return
						}
						if done.Add(1) == total {
							cancel() // wake the other consumers
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			reportRate(b, int(done.Load()))
		})
	}
}

func fill(b *testing.B, q *jobq.Queue, n int) {
	b.Helper()
	for i := 0; i < n; i += benchBatch {
		tasks := make([]*jobq.Task, 0, benchBatch)
		for j := i; j < min(i+benchBatch, n); j++ {
			tasks = append(tasks, benchTask(j))
		}
		if _, err := q.PushBatch(b.Context(), tasks); err != nil {
			b.Fatal(err)
		}
	}
}
