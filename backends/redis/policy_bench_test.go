package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// BenchmarkDrainPolicies: a worker with 16 handlers drains b.N tasks spread
// over 100 concurrency keys, without policies and with a cap on every key
// (1000: never reached; 1: often reached), so that the difference is the
// cost of enforcing caps in the claim script. Run with:
//
//	go test -run '^$' -bench DrainPolicies -benchtime 20000x ./backends/redis/
func BenchmarkDrainPolicies(b *testing.B) {
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
			q := openBenchQueue(b)
			ctx := context.Background()
			for k := range keys {
				if mode.cap == 0 {
					break
				}
				p := jobq.Policy{Kind: jobq.ConcurrencyPolicy, Key: fmt.Sprintf("k%d", k), Limit: mode.cap}
				if err := q.Policies().Set(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			tasks := make([]*jobq.Task, b.N)
			for i := range tasks {
				tasks[i] = &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
				if mode.keyed {
					tasks[i].ConcurrencyKey = fmt.Sprintf("k%d", i%keys)
				}
			}
			if _, err := q.PushBatch(ctx, tasks); err != nil {
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
		})
	}
}
