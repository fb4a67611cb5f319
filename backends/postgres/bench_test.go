package postgres

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

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker"
)

// The benchmarks run against JOBQ_TEST_POSTGRES_URL (default the local
// server) through the portable API with default settings and a no-op
// handler. Run them with:
//
//	go test -run '^$' -bench . -benchtime 20000x ./backends/postgres/
//
// Each reports tasks/s; BenchmarkPickupLatency reports the median and p99
// (use -benchtime 500x for it). BenchmarkRawSQLLimit is the bar: a bare
// SKIP LOCKED claim-and-delete loop with no jobq code at all.

// handlers is how many tasks the benchmark worker runs at once.
const handlers = 16

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
	return newQueueURL(b, append([]string{"schema=" + schema}, extra...)...)
}

func openBenchQueue(b *testing.B, extra ...string) (*jobq.Queue, *pgDriver) {
	b.Helper()
	q, err := jobq.OpenWithOptions(context.Background(), benchURL(b, extra...), jobq.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		q.Clear(context.Background())
		q.Close()
	})
	var pool pgxPoolTarget
	if !q.As(&pool.txp) {
		b.Fatal("As(*TxPusher) failed")
	}
	return q, pool.txp.(*pgDriver)
}

type pgxPoolTarget struct{ txp TxPusher }

func benchTasks(n int) []*jobq.Task {
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	return tasks
}

var noop = worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })

func reportRate(b *testing.B, n int, d time.Duration) {
	b.ReportMetric(float64(n)/d.Seconds(), "tasks/s")
}

func newWorker(q *jobq.Queue, wait bool) *worker.Worker {
	return worker.New(q, noop, worker.Options{Concurrency: handlers, Wait: wait, StatusInterval: -1, Logger: slog.New(slog.DiscardHandler)})
}

// BenchmarkEndToEnd: one producer pushes b.N tasks in batches of 100 while a
// worker with 16 handlers consumes them.
func BenchmarkEndToEnd(b *testing.B) {
	q, _ := openBenchQueue(b)
	tasks := benchTasks(b.N)
	w := newWorker(q, true)
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
	q, _ := openBenchQueue(b)
	ctx := context.Background()
	if _, err := q.PushBatch(ctx, benchTasks(b.N)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	w := newWorker(q, false)
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

// BenchmarkPushOne: one producer pushes tasks one Push call at a time, with
// the default durable commit ("durable": each push waits for its WAL flush)
// and with sync_push=false.
func BenchmarkPushOne(b *testing.B) {
	for _, mode := range []string{"durable", "sync_push=false"} {
		b.Run(mode, func(b *testing.B) {
			var extra []string
			if mode != "durable" {
				extra = append(extra, mode)
			}
			q, _ := openBenchQueue(b, extra...)
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
		})
	}
}

// BenchmarkPushBatch: one producer pushes b.N tasks with PushBatch calls of
// 1000.
func BenchmarkPushBatch(b *testing.B) {
	q, _ := openBenchQueue(b)
	tasks := benchTasks(b.N)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for lo := 0; lo < len(tasks); lo += 1000 {
		if _, err := q.PushBatch(ctx, tasks[lo:min(lo+1000, len(tasks))]); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, b.N, time.Since(start))
}

// BenchmarkPickupLatency: a receiver waits on an empty queue; the time from
// the start of a Push to the receiver holding the task. The producer is a
// separate Queue (its own pool), so the wake-up travels through
// LISTEN/NOTIFY as it would between machines. A durable push includes its
// WAL flush, since the notification is delivered at commit.
func BenchmarkPickupLatency(b *testing.B) {
	for _, mode := range []string{"durable", "sync_push=false"} {
		b.Run(mode, func(b *testing.B) {
			var extra []string
			if mode != "durable" {
				extra = append(extra, mode)
			}
			benchPickup(b, benchURL(b, extra...))
		})
	}
}

func benchPickup(b *testing.B, raw string) {
	open := func() *jobq.Queue {
		q, err := jobq.OpenWithOptions(context.Background(), raw, jobq.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { q.Close() })
		return q
	}
	consumer, producer := open(), open()
	var txp TxPusher
	consumer.As(&txp)
	d := txp.(*pgDriver)
	ctx := context.Background()
	got := make(chan time.Time)
	go func() {
		for {
			env, err := consumer.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 10 * time.Second})
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
		for d.idle.Load() == 0 { // the receiver is idle again
			time.Sleep(50 * time.Microsecond)
		}
		start := time.Now()
		if _, err := producer.Push(ctx, t); err != nil {
			b.Fatal(err)
		}
		at, ok := <-got
		if !ok {
			b.Fatal("receiver stopped")
		}
		lat = append(lat, at.Sub(start))
	}
	b.StopTimer()
	consumer.Close() // ends the receiver
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
}

// BenchmarkRawSQLLimit is the bar the other benchmarks are measured against,
// on a minimal table (id, body) with no jobq code at all:
//
//   - insert-one: one producer runs a plain durable INSERT per row, the
//     limit for BenchmarkPushOne/durable.
//
//   - one, batch16: 16 goroutines run a bare claim-and-delete over b.N
//     pre-filled rows, one row per statement or 16 (what the worker asks for
//     when all its handlers are free), committing without waiting for the
//     disk as jobq's claims and settlements do:
//
//     DELETE FROM raw WHERE id IN (SELECT id FROM raw ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED)
func BenchmarkRawSQLLimit(b *testing.B) {
	rawTable := func(b *testing.B, d *pgDriver, rows int) string {
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
	b.Run("insert-one", func(b *testing.B) {
		_, d := openBenchQueue(b)
		ctx := context.Background()
		table := rawTable(b, d, 0)
		insert := `INSERT INTO ` + table + ` (body) VALUES ($1)`
		body := []byte(`{"version": 1, "kwargs": "{}"}`)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			if _, err := d.pool.Exec(ctx, insert, body); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, b.N, time.Since(start))
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
			var done atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range handlers {
				wg.Go(func() {
					for {
						tag, err := d.pool.Exec(ctx, claim, per)
						if err != nil {
							b.Error(err)
							return
						}
						if tag.RowsAffected() == 0 {
							return
						}
						done.Add(tag.RowsAffected())
					}
				})
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
// portable layer or the worker: 16 goroutines each claim up to 16 messages
// and complete them in one call.
func BenchmarkDriverClaimComplete(b *testing.B) {
	d := openURL(b, benchURL(b))
	ctx := context.Background()
	msgs := make([]*driver.Message, b.N)
	for i := range msgs {
		msgs[i] = &driver.Message{ID: fmt.Sprint(i), Body: []byte(`{"version": 1, "kwargs": "{}"}`)}
	}
	for lo := 0; lo < len(msgs); lo += 5000 {
		if _, err := d.Push(ctx, msgs[lo:min(lo+5000, len(msgs))]); err != nil {
			b.Fatal(err)
		}
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range handlers {
		wg.Go(func() {
			for {
				got, err := d.Receive(ctx, driver.ReceiveParams{Max: handlers, Visibility: time.Minute})
				if err != nil {
					b.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				leases := make([]driver.Lease, len(got))
				for i, r := range got {
					leases[i] = r.Lease
				}
				if errs := d.Complete(ctx, leases); errs != nil {
					b.Error(errs)
					return
				}
				done.Add(int64(len(got)))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if done.Load() != int64(b.N) {
		b.Fatalf("completed %d, want %d", done.Load(), b.N)
	}
	reportRate(b, b.N, elapsed)
}

// BenchmarkQueueClaimComplete is BenchmarkDriverClaimComplete through the
// portable API, without the worker: 16 goroutines each ReceiveBatch up to
// 16 tasks and Complete each (the portable layer batches the completions).
// Between it and BenchmarkDrain lies the worker's own cost.
func BenchmarkQueueClaimComplete(b *testing.B) {
	q, _ := openBenchQueue(b)
	ctx := context.Background()
	if _, err := q.PushBatch(ctx, benchTasks(b.N)); err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range handlers {
		wg.Go(func() {
			for {
				envs, err := q.ReceiveBatch(ctx, handlers, jobq.ReceiveOptions{Visibility: time.Minute})
				if err != nil {
					b.Error(err)
					return
				}
				if len(envs) == 0 {
					return
				}
				var cwg sync.WaitGroup
				for _, e := range envs {
					cwg.Go(func() {
						if err := e.Complete(ctx); err != nil {
							b.Error(err)
						}
					})
				}
				cwg.Wait()
				done.Add(int64(len(envs)))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if done.Load() != int64(b.N) {
		b.Fatalf("completed %d, want %d", done.Load(), b.N)
	}
	reportRate(b, b.N, elapsed)
}
