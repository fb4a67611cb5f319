package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// TestWorkerRollsUpResults: a worker rolls up the queue's result records
// (Admin.FillRollups) after it starts, which on Postgres keeps at least
// the latest closed slot's rollup (an empty one for a new queue), unless
// NoHistoryRollups is set.
func TestWorkerRollsUpResults(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  bool
	}{{"default", false}, {"no-history-rollups", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q := openPostgres(t)
			conn, err := pgx.Connect(ctx, postgresConnURL(t))
			table := pgx.Identifier{postgresSchema(t), "results_rollup"}.Sanitize()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			kept := func() int {
				var n int
				// The table is made by the first fill or history.
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE queue = $1`, q.Name()).Scan(&n); err != nil {
					return 0
				}
				return n
			}
			pushOne(t, q, &jobq.Task{Command: "true"})
			w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil }),
				worker.Options{Wait: true, Poll: 100 * time.Millisecond, NoHistoryRollups: tc.off})
			worker.SetRollupFirst(w, 0)
			events, _ := w.Subscribe(0)
			errc := make(chan error, 1)
			go func() { errc <- w.Run(ctx) }()
			if ev := <-events; ev.Outcome != worker.Completed {
				t.Fatalf("event %+v; want the task completed", ev)
			}
			if !tc.off {
				// The guard stops waiting should no fill ever keep a rollup.
				guard := time.After(30 * time.Second)
				for waiting := true; waiting && kept() == 0; {
					select {
					case <-guard:
						t.Error("no rollup kept by the worker")
						waiting = false
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
			w.Stop()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if n := kept(); (n > 0) == tc.off {
				t.Errorf("%d rollups kept with NoHistoryRollups %v", n, tc.off)
			}
		})
	}
}
