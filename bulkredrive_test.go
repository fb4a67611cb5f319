package jobq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestRequeueWhereOnceWhileWorkersDeadLetterAgain: a redrive by filter
// pages through the dead letters while workers take each requeued task
// and dead-letter it again at once, so the letters come back behind the
// cursor (Postgres, SQLite: a new letter at the end; Redis: the same
// member, which ZSCAN may meet again). Each dead letter present at the
// start is requeued exactly once, and the counts are of those letters,
// not of the letters the run itself made.
func TestRequeueWhereOnceWhileWorkersDeadLetterAgain(t *testing.T) {
	t.Parallel()
	const n = 300 // above Redis's listpack size, so that ZSCAN pages
	for _, backend := range []string{"sqlite", "postgres", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			q := engines.Open(t, engines.URLs(t, "redrive-once")[backend])
			ctx := t.Context()
			tasks := make([]*jobq.Task, n)
			for i := range tasks {
				tasks[i] = &jobq.Task{Command: fmt.Sprintf("echo %d; exit 1", i)}
			}
			if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
				t.Fatal(err)
			}
			for left := n; left > 0; {
				envs, err := q.ReceiveBatch(ctx, min(left, 50), jobq.ReceiveOptions{Wait: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range envs {
					if err := e.DeadLetter(ctx, "the first run fails", ""); err != nil {
						t.Fatal(err)
					}
				}
				if len(envs) == 0 {
					t.Fatalf("%d tasks never came to be dead-lettered", left)
				}
				left -= len(envs)
			}
			workers, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					deadLetterAgain(workers, q)
				}()
			}
			// Without the fence the run chases its own letters and may
			// never end: bound it.
			bounded, cancel := context.WithTimeout(ctx, time.Minute)
			res, err := q.Admin().RequeueWhere(bounded, jobq.Filter{BatchSize: 7})
			cancel()
			stop()
			wg.Wait()
			if err != nil {
				t.Fatalf("after requeueing %d of %d matching (%d scanned): %v", res.Done, res.Matched, res.Scanned, err)
			}
			if res.Matched != n || res.Done != n {
				t.Errorf("requeued %d of %d matching; want %d of %d: the %d dead letters there were, each once", res.Done, res.Matched, n, n, n)
			}
		})
	}
}

// deadLetterAgain dead-letters every task it receives until ctx ends.
func deadLetterAgain(ctx context.Context, q *jobq.Queue) {
	for ctx.Err() == nil {
		envs, err := q.ReceiveBatch(ctx, 10, jobq.ReceiveOptions{Wait: 100 * time.Millisecond})
		if err != nil {
			return
		}
		for _, e := range envs {
			_ = e.DeadLetter(context.Background(), "the run after the redrive fails too", "")
		}
	}
}
