package postgres

import (
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/benchkit"
)

// BenchmarkDrainPolicies: a worker with 16 handlers drains b.N tasks spread
// over 100 concurrency keys, without policies and with a cap (never
// reached) on every key, so that the difference is the cost of enforcing
// caps in the claim. Run with:
//
//	go test -run '^$' -bench DrainPolicies -benchtime 20000x ./backends/postgres/
func BenchmarkDrainPolicies(b *testing.B) {
	benchkit.DrainPolicies(b, func(b *testing.B) *jobq.Queue {
		q, _ := openBenchQueue(b)
		return q
	})
}
