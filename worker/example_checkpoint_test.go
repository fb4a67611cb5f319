package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strconv"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// A Go handler that resumes from its checkpoint: it counts to 8, and when
// it is stopped (here by Stop, as a preemption notice would) it saves how
// far it got. The next worker's attempt starts there.
func ExampleJob_SaveCheckpoint() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobq-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Checkpoints are kept in the queue's stash.
	q, err := jobq.OpenWithOptions(ctx, "mem://example-checkpoint", jobq.Options{StashURL: "file://" + dir})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Kind: "count", Payload: []byte(`{}`)}); err != nil {
		log.Fatal(err)
	}

	var first *worker.Worker
	count := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		next := 1
		if saved, ok := job.Checkpoint(); ok {
			next, _ = strconv.Atoi(string(saved))
			fmt.Println("resuming at", next)
		}
		for ; next <= 8; next++ {
			if next == 5 && job.Envelope.DeliveryCount == 1 {
				first.Stop() // in real life: a preemption notice, SIGTERM
			}
			if ctx.Err() != nil {
				// Stopped: keep the progress for the next attempt. The
				// save works after ctx has ended.
				if err := job.SaveCheckpoint(ctx, []byte(strconv.Itoa(next))); err != nil {
					return err
				}
				fmt.Println("stopped before", next)
				return ctx.Err()
			}
			fmt.Println("step", next)
		}
		return nil
	})
	opts := worker.Options{Concurrency: 1, Checkpoints: true, Logger: slog.New(slog.DiscardHandler)}
	first = worker.New(q, count, opts)
	if err := first.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Another worker, perhaps on another machine, finishes the task.
	if err := worker.Run(ctx, q, count, opts); err != nil {
		log.Fatal(err)
	}
	// Output:
	// step 1
	// step 2
	// step 3
	// step 4
	// stopped before 5
	// resuming at 5
	// step 5
	// step 6
	// step 7
	// step 8
}
