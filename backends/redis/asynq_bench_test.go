package redis

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/tools/testkit/benchkit"
)

// The asynq benchmarks run the same workloads on asynq (the Redis queue Go
// users pick most often) with its defaults, except for the 16 handlers, on
// the same server, so the figures in docs/backends/redis.md compare like
// with like. asynq has no batch enqueue, so its producer pushes one task
// at a time.

// asynqEnv is an asynq client and a fresh queue name on the test server,
// deleted after the benchmark.
type asynqEnv struct {
	rdb    *goredis.Client
	client *asynq.Client
	queue  string
}

func newAsynqEnv(b *testing.B) *asynqEnv {
	b.Helper()
	base, u := serverOptions(b)
	opts := *base
	// asynq's default client settings: go-redis's own dialer, without
	// jobq's connection wrappers.
	opts.MaxRetries = 0
	opts.ContextTimeoutEnabled = false
	opts.Dialer = nil
	e := &asynqEnv{
		rdb:   goredis.NewClient(&opts),
		queue: fmt.Sprintf("jobqbench-%d-%d", time.Now().UnixNano(), queueSeq.Add(1)),
	}
	e.client = asynq.NewClientFromRedisClient(e.rdb)
	b.Cleanup(func() {
		_ = asynq.NewInspectorFromRedisClient(e.rdb).DeleteQueue(e.queue, true)
		_ = e.rdb.Close()
		// DeleteQueue leaves the queue's statistics counters behind.
		deleteKeys(b, u, "asynq:{"+e.queue+"}:*")
	})
	return e
}

// server starts an asynq server with 16 handlers on the queue; h runs for
// every task.
func (e *asynqEnv) server(b *testing.B, h func()) *asynq.Server {
	b.Helper()
	srv := asynq.NewServerFromRedisClient(e.rdb, asynq.Config{
		Concurrency: handlers,
		Queues:      map[string]int{e.queue: 1},
		LogLevel:    asynq.FatalLevel,
	})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { h(); return nil })); err != nil {
		b.Fatal(err)
	}
	return srv
}

func (e *asynqEnv) enqueue(b *testing.B, i int) {
	if _, err := e.client.Enqueue(asynq.NewTask("noop", fmt.Appendf(nil, `{"n": %d}`, i)), asynq.Queue(e.queue)); err != nil {
		b.Error(err)
	}
}

// BenchmarkAsynqEndToEnd: one producer enqueues b.N tasks while an asynq
// server with 16 handlers processes them.
func BenchmarkAsynqEndToEnd(b *testing.B) {
	e := newAsynqEnv(b)
	var done atomic.Int64
	start := time.Now()
	srv := e.server(b, func() { done.Add(1) })
	defer srv.Shutdown()
	go func() {
		for i := range b.N {
			e.enqueue(b, i)
		}
	}()
	for done.Load() < int64(b.N) && !b.Failed() {
		time.Sleep(time.Millisecond)
	}
	reportRate(b, b.N, time.Since(start))
}

// BenchmarkAsynqDrain: an asynq server with 16 handlers processes b.N
// tasks enqueued before it started.
func BenchmarkAsynqDrain(b *testing.B) {
	e := newAsynqEnv(b)
	for i := range b.N {
		e.enqueue(b, i)
	}
	var done atomic.Int64
	b.ResetTimer()
	start := time.Now()
	srv := e.server(b, func() { done.Add(1) })
	defer srv.Shutdown()
	for done.Load() < int64(b.N) && !b.Failed() {
		time.Sleep(time.Millisecond)
	}
	reportRate(b, b.N, time.Since(start))
}

// BenchmarkAsynqPushOne: producers (1 or 8) enqueue tasks one at a time.
func BenchmarkAsynqPushOne(b *testing.B) {
	for _, p := range pushProducers {
		b.Run(fmt.Sprintf("producers=%d", p), func(b *testing.B) {
			e := newAsynqEnv(b)
			b.ResetTimer()
			cm := benchkit.MarkCPU()
			start := time.Now()
			benchkit.EachFrom(b, b.N, p, func(i int) error {
				e.enqueue(b, i) // safe from several goroutines, as b.Error is
				return nil
			})
			elapsed := time.Since(start)
			cm.Report(b, b.N)
			reportRate(b, b.N, elapsed)
		})
	}
}

// BenchmarkAsynqPickupLatency: the time from the start of an Enqueue to the
// handler running, with the server idle on an empty queue.
func BenchmarkAsynqPickupLatency(b *testing.B) {
	e := newAsynqEnv(b)
	got := make(chan time.Time, 1)
	srv := e.server(b, func() { got <- time.Now() })
	defer srv.Shutdown()
	time.Sleep(100 * time.Millisecond) // let the server go idle
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		e.enqueue(b, i)
		lat = append(lat, (<-got).Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
}
