package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
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

// BenchmarkDrainRateWindow: a worker drains b.N tasks of one rate-limit key
// admitted 20 per 50 ms (400/s at most); of-limit is the drain's rate as a
// fraction of that. Run with:
//
//	go test -run '^$' -bench DrainRateWindow -benchtime 400x ./backends/postgres/
func BenchmarkDrainRateWindow(b *testing.B) {
	benchkit.DrainRateWindow(b, func(b *testing.B) *jobq.Queue {
		q, _ := openBenchQueue(b)
		return q
	}, 20, 50*time.Millisecond)
}

// BenchmarkClaimBusyCappedQueue: one capped claim of 32 (rolled back, so
// every iteration sees the same queue) on a queue whose fleet holds 3,000
// leases over 100 keys, each capped at 5,000, with 50,000 tasks queued:
// more held rows than a claim counts as a bound on every key's, so each
// key it meets is counted on its own (schema step 24). Run with:
//
//	go test -run '^$' -bench ClaimBusyCappedQueue -benchtime 300x ./backends/postgres/
func BenchmarkClaimBusyCappedQueue(b *testing.B) {
	d, err := openRaw(benchURL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	ctx := context.Background()
	for i := range 100 {
		if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: fmt.Sprintf("k%d", i), Limit: 5000}); err != nil {
			b.Fatal(err)
		}
	}
	s := pgx.Identifier{d.cfg.schema}.Sanitize()
	for _, stmt := range []string{
		`INSERT INTO ` + s + `.messages (queue, task_key, packed_body, concurrency_key, visible_at, lease, deliveries)
		SELECT $1, ('\x' || md5('leased' || i))::bytea, '\x00'::bytea, 'k' || (i % 100), now() + interval '1 day', gen_random_uuid(), 1
		FROM generate_series(1, 3000) i`,
		`INSERT INTO ` + s + `.held (queue, key, id, priority, lease)
		SELECT queue, concurrency_key, id, priority, lease FROM ` + s + `.messages WHERE queue = $1`,
		`INSERT INTO ` + s + `.messages (queue, task_key, packed_body, concurrency_key)
		SELECT $1, ('\x' || md5('queued' || i))::bytea, '\x00'::bytea, 'k' || (i % 100) FROM generate_series(1, 50000) i`,
	} {
		if _, err := d.pool.Exec(ctx, stmt, d.cfg.queue); err != nil {
			b.Fatal(err)
		}
	}
	for _, table := range []string{"messages", "held"} {
		if _, err := d.pool.Exec(ctx, `VACUUM ANALYZE `+s+`.`+table); err != nil {
			b.Fatal(err)
		}
	}
	claim := `SELECT count(*) FROM ` + s + `.claim_lookup($1, 32, 60000000)`
	b.ResetTimer()
	for b.Loop() {
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var n int
		if err := tx.QueryRow(ctx, claim, d.cfg.queue).Scan(&n); err != nil || n != 32 {
			b.Fatalf("claim: %d messages, %v; want 32", n, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimPastFullKey: claims of 32 past 1,000 to 100,000 tasks of
// a key at its cap (benchkit.ClaimPastFullKey). Run with:
//
//	go test -run '^$' -bench ClaimPastFullKey -benchtime 500x ./backends/postgres/
func BenchmarkClaimPastFullKey(b *testing.B) {
	benchkit.ClaimPastFullKey(b, func(b *testing.B) benchkit.PolicyDriver {
		d, err := openRaw(benchURL(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return d
	})
}
