package benchkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// EndToEnd times one producer pushing b.N tasks to q in PushBatch calls of
// 100 while a worker with WorkerHandlers() handlers consumes them, until the worker
// has done them all, and reports tasks/s.
func EndToEnd(b *testing.B, q *jobq.Queue) { endToEnd(b, q, "") }

// endToEnd is EndToEnd with every task in group (none when empty).
func endToEnd(b *testing.B, q *jobq.Queue, group string) {
	tasks := Tasks(b.N)
	for _, t := range tasks {
		t.Group = group
	}
	w := newWorker(q, true)
	ctx := context.Background()
	runErr := make(chan error, 1)
	b.ResetTimer()
	cm := MarkCPU()
	start := time.Now()
	go func() { runErr <- w.Run(ctx) }()
	go func() {
		for lo := 0; lo < len(tasks); lo += 100 {
			if _, err := q.PushBatch(ctx, tasks[lo:min(lo+100, len(tasks))], jobq.PushOptions{}); err != nil {
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
	cm.Report(b, b.N)
	w.Stop()
	if err := <-runErr; err != nil {
		b.Fatal(err)
	}
	ReportRate(b, b.N, elapsed)
}

// Drain pushes b.N tasks to q, then times a worker with WorkerHandlers() handlers
// draining them (it exits when the queue is empty) and reports tasks/s.
func Drain(b *testing.B, q *jobq.Queue) {
	if _, err := q.PushBatch(context.Background(), Tasks(b.N), jobq.PushOptions{}); err != nil {
		b.Fatal(err)
	}
	drainPushed(b, q)
}

// drainPushed times a worker draining the b.N tasks already in q, checks it
// did them all and reports tasks/s.
func drainPushed(b *testing.B, q *jobq.Queue) {
	b.ResetTimer()
	cm := MarkCPU()
	start := time.Now()
	w := newWorker(q, false)
	if err := w.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cm.Report(b, b.N)
	if got := w.Counts().Done; got != int64(b.N) {
		b.Fatalf("drained %d tasks, want %d", got, b.N)
	}
	ReportRate(b, b.N, elapsed)
}

// DrainPolicies runs, as sub-benchmarks, a drain of b.N tasks spread over 100
// concurrency keys: "unkeyed" (no keys), "100keys-no-policies",
// "100keys-capped" (a concurrency cap of 1000 on every key, never reached)
// and "100keys-capped-at-1". open returns a fresh, empty queue for each.
func DrainPolicies(b *testing.B, open func(b *testing.B) *jobq.Queue) {
	const keys = 100
	for _, mode := range []struct {
		name  string
		keyed bool
		cap   int64 // 0: no policies
	}{
		{"unkeyed", false, 0},
		{"100keys-no-policies", true, 0},
		{"100keys-capped", true, 1000},
		{"100keys-capped-at-1", true, 1},
	} {
		b.Run(mode.name, func(b *testing.B) {
			q := open(b)
			ctx := context.Background()
			for k := range keys {
				if mode.cap == 0 {
					break
				}
				p := driver.Policy{Kind: driver.ConcurrencyPolicy, Key: fmt.Sprintf("k%d", k), Limit: mode.cap}
				if err := q.Admin().SetPolicy(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			tasks := Tasks(b.N)
			if mode.keyed {
				for i, t := range tasks {
					t.ConcurrencyKey = fmt.Sprintf("k%d", i%keys)
				}
			}
			if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
				b.Fatal(err)
			}
			drainPushed(b, q)
		})
	}
}

// EndToEndGroups runs EndToEnd as sub-benchmarks on queues from open:
// "none" with tasks without a group, "group" with every task in one group
// (Task.Group), to measure what counting groups costs.
func EndToEndGroups(b *testing.B, open func(b *testing.B) *jobq.Queue) {
	for _, mode := range []string{"none", "group"} {
		b.Run(mode, func(b *testing.B) {
			q := open(b)
			group := ""
			if mode == "group" {
				group = fmt.Sprintf("bench-%d", time.Now().UnixNano())
			}
			endToEnd(b, q, group)
		})
	}
}

// DrainRateWindow drains b.N tasks of one rate-limit key whose policy
// admits limit claims per period, and reports tasks/s and of-limit, the
// rate as a fraction of limit/period: how much of the window's throughput
// the receivers' looks lose while it is full. open returns a fresh, empty
// queue.
func DrainRateWindow(b *testing.B, open func(b *testing.B) *jobq.Queue, limit int64, period time.Duration) {
	q := open(b)
	ctx := context.Background()
	if err := q.Admin().SetPolicy(ctx, driver.Policy{Kind: driver.RatePolicy, Key: "api", Limit: limit, Period: period}); err != nil {
		b.Fatal(err)
	}
	tasks := Tasks(b.N)
	for _, t := range tasks {
		t.RateLimitKey = "api"
	}
	if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	drainPushed(b, q)
	perSec := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(perSec/(float64(limit)/period.Seconds()), "of-limit")
}
