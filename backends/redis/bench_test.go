package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker"
)

// The benchmarks run against JOBQ_TEST_REDIS_URL (default the local server)
// with default settings and a no-op handler. Run them with:
//
//	go test -run '^$' -bench . -benchtime 20000x ./backends/redis/
//
// Each reports tasks/s; BenchmarkPickupLatency reports the median and p99.

// openBenchQueue opens a fresh queue through the portable API.
func openBenchQueue(b *testing.B) *jobq.Queue {
	b.Helper()
	q, err := jobq.OpenWithOptions(context.Background(), newQueueURL(b, ""), jobq.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q
}

func benchTasks(n int) []*jobq.Task {
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	return tasks
}

var noop = worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })

// handlers is how many tasks the benchmark worker runs at once.
const handlers = 16

func reportRate(b *testing.B, n int, d time.Duration) {
	b.ReportMetric(float64(n)/d.Seconds(), "tasks/s")
}

// BenchmarkEndToEnd: one producer pushes b.N tasks in batches of 100
// (PushBatch, pipelined) while a worker with 16 handlers consumes them.
func BenchmarkEndToEnd(b *testing.B) {
	q := openBenchQueue(b)
	tasks := benchTasks(b.N)
	w := worker.New(q, noop, worker.Options{Concurrency: handlers, Wait: true, StatusInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	runErr := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { runErr <- w.Run(ctx) }()
	go func() {
		for lo := 0; lo < len(tasks); lo += 100 {
			if _, err := q.PushBatch(ctx, tasks[lo:min(lo+100, len(tasks))]); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	for w.Counts().Done < int64(b.N) && !b.Failed() {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	w.Stop()
	if err := <-runErr; err != nil {
		b.Fatal(err)
	}
	reportRate(b, b.N, elapsed)
}

// BenchmarkDrain: a worker with 16 handlers drains b.N pre-pushed tasks and
// exits when the queue is empty.
func BenchmarkDrain(b *testing.B) {
	q := openBenchQueue(b)
	ctx := context.Background()
	if _, err := q.PushBatch(ctx, benchTasks(b.N)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	w := worker.New(q, noop, worker.Options{Concurrency: handlers, StatusInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err := w.Run(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if got := w.Counts().Done; got != int64(b.N) {
		b.Fatalf("drained %d tasks, want %d", got, b.N)
	}
	reportRate(b, b.N, elapsed)
}

// BenchmarkPushOne: one producer pushes tasks one Push call at a time.
func BenchmarkPushOne(b *testing.B) {
	q := openBenchQueue(b)
	tasks := benchTasks(b.N)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for _, t := range tasks {
		if _, err := q.Push(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, b.N, time.Since(start))
}

// BenchmarkPickupLatency: a receiver waits on an empty queue; the time from
// the start of a Push to the receiver holding the task.
func BenchmarkPickupLatency(b *testing.B) {
	q := openBenchQueue(b)
	d := driverOf(b, q)
	ctx := context.Background()
	got := make(chan time.Time)
	go func() {
		for {
			env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 10 * time.Second})
			if err != nil {
				close(got)
				return
			}
			got <- time.Now()
			_ = env.Complete(ctx)
		}
	}()
	tasks := benchTasks(b.N)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for _, t := range tasks {
		for d.wake.waiters() == 0 { // the receiver is idle again
			time.Sleep(50 * time.Microsecond)
		}
		start := time.Now()
		if _, err := q.Push(ctx, t); err != nil {
			b.Fatal(err)
		}
		at, ok := <-got
		if !ok {
			b.Fatal("receiver stopped")
		}
		lat = append(lat, at.Sub(start))
	}
	b.StopTimer()
	q.Close() // ends the receiver
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
}

// rawClaimDelete is the least work a Redis queue can do per task: pop the
// lowest member of a sorted set and delete its hash, in one script call.
var rawClaimDelete = goredis.NewScript(`
local got = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[2]))
for i = 1, #got, 2 do redis.call('DEL', ARGV[1] .. got[i]) end
return #got / 2
`)

// BenchmarkRawRedisLimit is the bar the other benchmarks are measured
// against: 16 clients run a bare Lua claim-and-delete over b.N pre-filled
// messages, one message per call ("one") or 16 per call ("batch16", what
// the worker asks for when all its handlers are free).
func BenchmarkRawRedisLimit(b *testing.B) {
	for _, per := range []int{1, handlers} {
		name := "one"
		if per > 1 {
			name = fmt.Sprintf("batch%d", per)
		}
		b.Run(name, func(b *testing.B) {
			q := openBenchQueue(b)
			d := driverOf(b, q)
			ctx := context.Background()
			set, hp := d.prefix+"raw", d.prefix+"rawm:"
			p := d.client.Pipeline()
			for i := range b.N {
				mid := fmt.Sprint(i)
				p.HSet(ctx, hp+mid, "b", `{"version": 1, "kwargs": "{}"}`)
				p.ZAdd(ctx, set, goredis.Z{Score: float64(i), Member: mid})
				if p.Len() >= 2000 {
					if _, err := p.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			var done atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range handlers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n, err := rawClaimDelete.Run(ctx, d.client, []string{set}, hp, per).Int64()
						if err != nil {
							b.Error(err)
							return
						}
						if n == 0 {
							return
						}
						done.Add(n)
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if done.Load() != int64(b.N) {
				b.Fatalf("claimed %d, want %d", done.Load(), b.N)
			}
			reportRate(b, b.N, elapsed)
		})
	}
}

// BenchmarkDriverClaimComplete measures the driver alone, without the
// portable layer or worker: 16 goroutines each claim up to 16 messages and
// complete them in one call.
func BenchmarkDriverClaimComplete(b *testing.B) {
	d := openURL(b, newQueueURL(b, ""))
	ctx := context.Background()
	msgs := make([]*driver.Message, b.N)
	for i := range msgs {
		msgs[i] = &driver.Message{ID: fmt.Sprint(i), Body: []byte(`{"version": 1, "kwargs": "{}"}`)}
	}
	if _, err := d.Push(ctx, msgs); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range handlers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				recs, err := d.Receive(ctx, driver.ReceiveParams{Max: handlers, Visibility: time.Minute})
				if err != nil || len(recs) == 0 {
					return
				}
				leases := make([]driver.Lease, len(recs))
				for i, r := range recs {
					leases[i] = r.Lease
				}
				if errs := d.Complete(ctx, leases); errs != nil {
					b.Error(errs)
					return
				}
			}
		}()
	}
	wg.Wait()
	reportRate(b, b.N, time.Since(start))
}
