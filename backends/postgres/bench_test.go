package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/spinconn"
	"github.com/jobq/jobq/tools/testkit/benchkit"
)

// The benchmarks run against JOBQ_TEST_POSTGRES_URL (default the local
// server) through the portable API with default settings and a no-op
// handler. Run them with:
//
//	go test -run '^$' -bench '^Benchmark(EndToEnd|Drain|PushOne|PushBatch|RawSQLLimit|DriverClaimComplete|QueueClaimComplete|DrainPolicies)$' -benchtime 20000x ./backends/postgres/
//	go test -run '^$' -bench PickupLatency -benchtime 500x ./backends/postgres/
//
// Each reports tasks/s; BenchmarkPickupLatency reports the median and p99
// (it pushes one task at a time and waits for each, so 20000x would run for
// minutes). BenchmarkRawSQLLimit is the bar: a bare
// SKIP LOCKED claim-and-delete loop with no jobq code at all.

// handlers is how many tasks the benchmark worker runs at once.
const handlers = benchkit.Handlers

// benchURL returns a queue URL in a schema of its own, dropped after the
// benchmark, so that figures do not depend on what earlier runs left in the
// tables (dead rows, if autovacuum is slow or off).
func benchURL(b *testing.B, extra ...string) string {
	b.Helper()
	schema := fmt.Sprintf("jobq_bench_%d", time.Now().UnixNano())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testConnString())
		if err != nil {
			b.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			b.Logf("drop schema %s: %v", schema, err)
		}
	})
	// The schema is the benchmark's own, so the queue can have a short
	// name, as users' queues do: the name is part of every index entry.
	app := "jobq-" + schema
	trackOwnServer(b, app)
	return newQueueURL(b, append([]string{"schema=" + schema, "queue=bench", "application_name=" + app}, extra...)...)
}

// trackOwnServer makes the benchmark report the CPU time of the server
// processes serving connections named app ("own-server-µs/task"), apart
// from whatever else the server does meanwhile.
func trackOwnServer(b *testing.B, app string) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testConnString())
	if err != nil {
		b.Fatal(err)
	}
	benchkit.OwnServerCPU = func() (time.Duration, bool) {
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
		if err != nil {
			return 0, false
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return 0, false
		}
		return benchkit.ProcessCPU(pids)
	}
	b.Cleanup(func() {
		benchkit.OwnServerCPU = nil
		conn.Close(ctx)
	})
}

// openBenchQueue opens a queue in a schema of its own (see benchURL),
// cleared and closed after the benchmark, and returns its driver too.
func openBenchQueue(b *testing.B, extra ...string) (*jobq.Queue, *Driver) {
	b.Helper()
	q := benchkit.Open(b, benchURL(b, extra...))
	b.Cleanup(func() { q.Admin().Clear(context.Background()) })
	var d *Driver
	if !q.As(&d) {
		b.Fatal("As(**Driver) failed")
	}
	warmPool(b, d)
	return q, d
}

// warmPool opens the pool's connections before the timer starts, as a
// producer or worker that has run for a while has them: the pool opens
// connections as calls need them, and a new one costs a backend process
// (about 10 ms here), which would otherwise land in the first timed calls
// (a push of 20,000 tasks takes about 200 ms).
func warmPool(b *testing.B, d *Driver) {
	b.Helper()
	ctx := context.Background()
	conns := make([]*pgxpool.Conn, d.pool.Config().MaxConns)
	for i := range conns {
		c, err := d.pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	for _, c := range conns {
		c.Release()
	}
}

// modeURL is the extra URL parameter of a "durable"/"sync_push=false"
// sub-benchmark: none for durable.
func modeURL(mode string) []string {
	if mode == "durable" {
		return nil
	}
	return []string{mode}
}

// BenchmarkEndToEnd: one producer pushes b.N tasks in batches of 100 while a
// worker with 16 handlers consumes them.
func BenchmarkEndToEnd(b *testing.B) {
	q, _ := openBenchQueue(b)
	benchkit.EndToEnd(b, q)
}

// BenchmarkEndToEndRecords is BenchmarkEndToEnd on a queue that keeps no
// result records ("off") and on one that does ("on", as every Postgres
// queue does), to measure what records cost. Run it several times
// (-count) to alternate the two.
func BenchmarkEndToEndRecords(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		d, err := openRaw(benchURL(b))
		if err != nil {
			b.Fatal(err)
		}
		warmPool(b, d)
		benchkit.EndToEnd(b, benchkit.OpenWithoutRecords(b, d))
	})
	b.Run("on", func(b *testing.B) {
		q, _ := openBenchQueue(b)
		benchkit.EndToEnd(b, q)
	})
}

// BenchmarkDrain: a worker with 16 handlers drains b.N pre-pushed tasks and
// exits when the queue is empty.
func BenchmarkDrain(b *testing.B) {
	q, _ := openBenchQueue(b)
	benchkit.Drain(b, q)
}

// BenchmarkPushOne: one producer pushes tasks one Push call at a time, with
// the default durable commit ("durable": each push waits for its WAL flush),
// durable without polling for the reply ("spin=0", spin.go), and with
// sync_push=false.
func BenchmarkPushOne(b *testing.B) {
	for _, mode := range []string{"durable", "spin=0", "sync_push=false"} {
		b.Run(mode, func(b *testing.B) {
			q, _ := openBenchQueue(b, modeURL(mode)...)
			benchkit.PushOne(b, q)
		})
	}
}

// BenchmarkPushBatch: one producer pushes b.N tasks with PushBatch calls of
// 1000, one call at a time ("sequential") or four at a time ("4_in_flight",
// what `jobq push` does).
func BenchmarkPushBatch(b *testing.B) {
	for _, inFlight := range []int{1, 4} {
		name := "sequential"
		if inFlight > 1 {
			name = fmt.Sprintf("%d_in_flight", inFlight)
		}
		b.Run(name, func(b *testing.B) {
			q, _ := openBenchQueue(b)
			benchkit.PushBatch(b, q, 1000, inFlight)
		})
	}
}

// BenchmarkPickupLatency: a receiver waits on an empty queue; the time from
// the start of a Push to the receiver holding the task. The producer is a
// separate Queue (its own pool), so the wake-up travels through
// LISTEN/NOTIFY as it would between machines. A durable push includes its
// WAL flush, since the notification is delivered at commit.
func BenchmarkPickupLatency(b *testing.B) {
	for _, mode := range []string{"durable", "spin=0", "sync_push=false"} {
		b.Run(mode, func(b *testing.B) {
			raw := benchURL(b, modeURL(mode)...)
			consumer, producer := benchkit.Open(b, raw), benchkit.Open(b, raw)
			var d *Driver
			consumer.As(&d)
			benchkit.PickupLatency(b, consumer, producer, func() bool { return d.idle.Load() != 0 })
		})
	}
}

// BenchmarkRawSQLLimit is the bar the other benchmarks are measured against,
// on a minimal table (id, body) with no jobq code at all:
//
//   - insert-one: one producer runs a plain durable INSERT per row, the
//     limit for BenchmarkPushOne/spin=0; insert-one-polling does the same
//     on a connection that polls for each reply as a one-task push does
//     (spin.go), the limit for BenchmarkPushOne/durable.
//
//   - insert-batch: one producer inserts rows 1,000 per statement, four
//     statements in flight, into a copy of the messages table (its
//     indexes, its fillfactor) from arrays of task ids and bodies: the
//     limit for BenchmarkPushBatch/4_in_flight, without jobq's dedup,
//     notification or encoding.
//
//   - one, batch16: 16 goroutines run a bare claim-and-delete over b.N
//     pre-filled rows, one row per statement or 16 (what the worker asks for
//     when all its handlers are free), committing without waiting for the
//     disk as jobq's claims and settlements do:
//
//     DELETE FROM raw WHERE id IN (SELECT id FROM raw ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED)
func BenchmarkRawSQLLimit(b *testing.B) {
	rawTable := func(b *testing.B, d *Driver, rows int) string {
		ctx := context.Background()
		table := pgx.Identifier{d.cfg.schema, "raw"}.Sanitize()
		if _, err := d.pool.Exec(ctx, `CREATE TABLE `+table+` (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body bytea NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.pool.Exec(context.Background(), `DROP TABLE `+table) })
		if _, err := d.pool.Exec(ctx, `INSERT INTO `+table+` (body) SELECT '{"version": 1, "kwargs": "{}"}'::bytea FROM generate_series(1, $1)`, rows); err != nil {
			b.Fatal(err)
		}
		if _, err := d.pool.Exec(ctx, `VACUUM ANALYZE `+table); err != nil {
			b.Fatal(err)
		}
		return table
	}
	for _, polling := range []bool{false, true} {
		name := "insert-one"
		if polling {
			name += "-polling"
		}
		b.Run(name, func(b *testing.B) {
			_, d := openBenchQueue(b)
			ctx := context.Background()
			table := rawTable(b, d, 0)
			insert := `INSERT INTO ` + table + ` (body) VALUES ($1)`
			body := []byte(`{"version": 1, "kwargs": "{}"}`)
			var db interface {
				Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
			} = d.pool
			if polling {
				// The connection a one-task push polls on (spin.go).
				conn, release, err := d.polling(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer release()
				c, ok := conn.(*pgxpool.Conn)
				if !ok || spinconn.Of(c.Conn().PgConn().Conn()) == nil {
					b.Skip("the connection cannot poll")
				}
				db = c
			}
			b.ResetTimer()
			cm := benchkit.MarkCPU()
			start := time.Now()
			for range b.N {
				if _, err := db.Exec(ctx, insert, body); err != nil {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			cm.Report(b, b.N)
			benchkit.ReportRate(b, b.N, elapsed)
		})
	}
	b.Run("insert-batch", func(b *testing.B) {
		_, d := openBenchQueue(b)
		ctx := context.Background()
		table := pgx.Identifier{d.cfg.schema, "raw_messages"}.Sanitize()
		messages := pgx.Identifier{d.cfg.schema, "messages"}.Sanitize()
		if _, err := d.pool.Exec(ctx, `CREATE TABLE `+table+` (LIKE `+messages+` INCLUDING ALL)`); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.pool.Exec(context.Background(), `DROP TABLE `+table) })
		// LIKE copies columns and indexes but not storage parameters: give
		// the copy the messages table's (its fillfactor of 50 doubles the
		// pages an insert fills).
		var opts string
		if err := d.pool.QueryRow(ctx, `SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class WHERE oid = $1::regclass`, messages).Scan(&opts); err != nil {
			b.Fatal(err)
		}
		if opts != "" {
			if _, err := d.pool.Exec(ctx, `ALTER TABLE `+table+` SET (`+opts+`)`); err != nil {
				b.Fatal(err)
			}
		}
		insert := `INSERT INTO ` + table + ` (queue, task_key, packed_body) SELECT 'bench', t, x FROM unnest($1::bytea[], $2::bytea[]) AS u(t, x)`
		const size, inFlight = 1000, 4
		ids, bodies := make([][]byte, b.N), make([][]byte, b.N)
		for i := range ids {
			id := fmt.Sprintf("%032x", i)
			ids[i] = taskKey(id)
			bodies[i] = fmt.Appendf(nil, `{"version": "1.0", "kwargs": {"n": %d}, "id": %q}`, i, id)
		}
		sem := make(chan struct{}, inFlight)
		errs := make(chan error, b.N/size+1)
		var wg sync.WaitGroup
		b.ResetTimer()
		cm := benchkit.MarkCPU()
		start := time.Now()
		for lo := 0; lo < b.N; lo += size {
			hi := min(lo+size, b.N)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := d.pool.Exec(ctx, insert, ids[lo:hi], bodies[lo:hi]); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		cm.Report(b, b.N)
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		benchkit.ReportRate(b, b.N, elapsed)
	})
	for _, per := range []int{1, handlers} {
		name := "one"
		if per > 1 {
			name = fmt.Sprintf("batch%d", per)
		}
		b.Run(name, func(b *testing.B) {
			_, d := openBenchQueue(b)
			ctx := context.Background()
			table := rawTable(b, d, b.N)
			claim := asyncCTE + ` DELETE FROM ` + table + ` USING async WHERE id IN (SELECT id FROM ` + table + ` ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)`
			benchkit.Claimers(b, "claimed", func() (int64, error) {
				tag, err := d.pool.Exec(ctx, claim, per)
				return tag.RowsAffected(), err
			})
		})
	}
}

// BenchmarkDriverClaimComplete measures the driver alone, without the
// portable layer or the worker: 16 goroutines each claim up to 16 messages
// and complete them in one call.
func BenchmarkDriverClaimComplete(b *testing.B) {
	benchkit.DriverClaimComplete(b, openURL(b, benchURL(b)), 5000)
}

// BenchmarkDriverClaimCompleteRecords is BenchmarkDriverClaimComplete
// with a result record stored by each completion's statement
// (CompleteParams.Result): records on ("on") against off ("off"), run
// alternately by -count.
func BenchmarkDriverClaimCompleteRecords(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchkit.DriverClaimComplete(b, openURL(b, benchURL(b)), 5000) })
	b.Run("on", func(b *testing.B) { benchkit.DriverClaimCompleteRecords(b, openURL(b, benchURL(b)), 5000) })
}

// BenchmarkQueueClaimComplete is BenchmarkDriverClaimComplete through the
// portable API, without the worker: 16 goroutines each ReceiveBatch up to
// 16 tasks and Complete each (the portable layer batches the completions).
// Between it and BenchmarkDrain lies the worker's own cost.
func BenchmarkQueueClaimComplete(b *testing.B) {
	q, _ := openBenchQueue(b)
	benchkit.QueueClaimComplete(b, q)
}

// BenchmarkEndToEndGroups is BenchmarkEndToEnd without groups ("none") and
// with every task in one group ("group"): what counting groups costs.
func BenchmarkEndToEndGroups(b *testing.B) {
	benchkit.EndToEndGroups(b, func(b *testing.B) *jobq.Queue {
		q, _ := openBenchQueue(b)
		return q
	})
}
