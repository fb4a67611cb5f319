package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/tools/testkit/benchkit"
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

// reportRate reports wall-clock throughput and the process's CPU time per
// task. On a shared machine the wall figure depends on the neighbours' load;
// the CPU figure much less so.
func reportRate(b *testing.B, tasks int, cpuStart time.Duration) {
	b.ReportMetric(float64(tasks)/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64((cpuTime()-cpuStart).Microseconds())/float64(tasks), "cpu-µs/task")
}

// cpuTime is the user plus system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPush: one producer, one task per call.
func BenchmarkPush(b *testing.B) {
	q := openBenchQueue(b)
	ctx := b.Context()
	i := 0
	cpu := cpuTime()
	for b.Loop() {
		if _, err := q.Push(ctx, benchTask(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportRate(b, i, cpu)
}

const benchBatch = 100

// BenchmarkPushBatch: one producer, 100 tasks per call (one transaction).
func BenchmarkPushBatch(b *testing.B) {
	q := openBenchQueue(b)
	ctx := b.Context()
	n := 0
	cpu := cpuTime()
	for b.Loop() {
		tasks := make([]*jobq.Task, benchBatch)
		for j := range tasks {
			tasks[j] = benchTask(n + j)
		}
		if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
			b.Fatal(err)
		}
		n += benchBatch
	}
	reportRate(b, n, cpu)
}

// BenchmarkReceiveComplete: one consumer, Receive then Complete, on a queue
// filled beforehand.
func BenchmarkReceiveComplete(b *testing.B) {
	q := openBenchQueue(b)
	ctx := b.Context()
	fill(b, q, b.N)
	b.ResetTimer()
	cpu := cpuTime()
	for range b.N {
		env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if err := env.Complete(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, b.N, cpu)
}

// BenchmarkEndToEnd: one producer pushes batches of 100 while consumers
// receive and complete; the clock stops when every task is completed.
// receive=1 uses Receive (one message per call, as a worker slot does);
// receive=10 uses ReceiveBatch and completes the batch's messages
// concurrently.
func BenchmarkEndToEnd(b *testing.B) {
	for _, bc := range []struct{ consumers, receive int }{{1, 1}, {4, 1}, {4, 10}} {
		b.Run(fmt.Sprintf("consumers=%d/receive=%d", bc.consumers, bc.receive), func(b *testing.B) {
			endToEnd(b, openBenchQueue(b), bc.consumers, bc.receive)
		})
	}
}

// BenchmarkEndToEndRecords is BenchmarkEndToEnd with 4 consumers and
// ReceiveBatch(10) on a queue that keeps no result records ("off") and on
// one that does ("on", as every SQLite queue does), to measure what
// records cost. Run it several times to alternate the two.
func BenchmarkEndToEndRecords(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		d, err := sqlite.New(b.Context(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{Queue: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		endToEnd(b, benchkit.OpenWithoutRecords(b, d), 4, 10)
	})
	b.Run("on", func(b *testing.B) { endToEnd(b, openBenchQueue(b), 4, 10) })
}

func endToEnd(b *testing.B, q *jobq.Queue, consumers, receive int) {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	total := int64(b.N)
	var done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := cpuTime()
	wg.Go(func() {
		for i := 0; i < int(total); i += benchBatch {
			tasks := make([]*jobq.Task, 0, benchBatch)
			for j := i; j < min(i+benchBatch, int(total)); j++ {
				tasks = append(tasks, benchTask(j))
			}
			if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	for range consumers {
		wg.Go(func() {
			for done.Load() < total {
				envs, err := q.ReceiveBatch(ctx, receive, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 100 * time.Millisecond})
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				var slots sync.WaitGroup
				for _, env := range envs {
					slots.Go(func() {
						if err := env.Complete(ctx); err != nil {
							b.Error(err)
							return
						}
						if done.Add(1) == total {
							cancel() // wake the other consumers
						}
					})
				}
				slots.Wait()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportRate(b, int(done.Load()), cpu)
}

func fill(b *testing.B, q *jobq.Queue, n int) {
	b.Helper()
	for i := 0; i < n; i += benchBatch {
		tasks := make([]*jobq.Task, 0, benchBatch)
		for j := i; j < min(i+benchBatch, n); j++ {
			tasks = append(tasks, benchTask(j))
		}
		if _, err := q.PushBatch(b.Context(), tasks, jobq.PushOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDriverClaimCompleteRecords measures the driver alone: 16
// claimers receive up to 16 messages and complete them in one call,
// without ("off") and with ("on") a result record stored by each
// completion (CompleteParams.Result).
func BenchmarkDriverClaimCompleteRecords(b *testing.B) {
	open := func(b *testing.B) *sqlite.Driver {
		d, err := sqlite.New(b.Context(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{Queue: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	}
	b.Run("off", func(b *testing.B) { benchkit.DriverClaimComplete(b, open(b), 1000) })
	b.Run("on", func(b *testing.B) { benchkit.DriverClaimCompleteRecords(b, open(b), 1000) })
}

// BenchmarkDrainRateWindow: a worker drains b.N tasks of one rate-limit key
// admitted 20 per 50 ms (400/s at most); of-limit is the drain's rate as a
// fraction of that. Run with:
//
//	go test -run '^$' -bench DrainRateWindow -benchtime 400x ./backends/sqlite/
func BenchmarkDrainRateWindow(b *testing.B) {
	benchkit.DrainRateWindow(b, openBenchQueue, 20, 50*time.Millisecond)
}

// BenchmarkDrainPolicies: a worker with 16 handlers drains b.N tasks spread
// over 100 concurrency keys, without policies and with a cap on every key
// (never reached, and of 1), as on Postgres and Redis. Run with:
//
//	go test -run '^$' -bench DrainPolicies -benchtime 5000x ./backends/sqlite/
func BenchmarkDrainPolicies(b *testing.B) {
	benchkit.DrainPolicies(b, openBenchQueue)
}

// BenchmarkClaimPastFullKey: claims of 32 past 1,000 to 100,000 tasks of
// a key at its cap (benchkit.ClaimPastFullKey). Run with:
//
//	go test -run '^$' -bench ClaimPastFullKey -benchtime 500x ./backends/sqlite/
func BenchmarkClaimPastFullKey(b *testing.B) {
	benchkit.ClaimPastFullKey(b, func(b *testing.B) benchkit.PolicyDriver {
		d, err := sqlite.New(b.Context(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{Queue: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	})
}
