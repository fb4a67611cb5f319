package redis

import (
	"testing"

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
