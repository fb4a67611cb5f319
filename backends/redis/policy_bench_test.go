package redis

import (
	"testing"
	"time"

	"github.com/jobq/jobq/tools/testkit/benchkit"
)

// BenchmarkDrainPolicies: a worker with 16 handlers drains b.N tasks spread
// over 100 concurrency keys, without policies and with a cap on every key
// (1000: never reached; 1: often reached), so that the difference is the
// cost of enforcing caps in the claim script. Run with:
//
//	go test -run '^$' -bench DrainPolicies -benchtime 20000x ./backends/redis/
func BenchmarkDrainPolicies(b *testing.B) {
	benchkit.DrainPolicies(b, openBenchQueue)
}

// BenchmarkDrainRateWindow: a worker drains b.N tasks of one rate-limit key
// admitted 20 per 50 ms (400/s at most); of-limit is the drain's rate as a
// fraction of that. Run with:
//
//	go test -run '^$' -bench DrainRateWindow -benchtime 400x ./backends/redis/
func BenchmarkDrainRateWindow(b *testing.B) {
	benchkit.DrainRateWindow(b, openBenchQueue, 20, 50*time.Millisecond)
}
