package jobq_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestWaitGroupReadingsBoundedWhileTasksEnd: on SQLite and Postgres, WaitGroup
// asked to poll every millisecond, on a group whose tasks end one after
// another, reads the counts of a bounded number of open tasks per task
// that ends: where a reading counts the open tasks by state, it is spaced
// by the time readings take, not repeated as fast as asked (work that
// grows with the square of the group's size).
func TestWaitGroupReadingsBoundedWhileTasksEnd(t *testing.T) {
	t.Parallel()
	const n = 3000
	// Reading back to back costs about 300 open tasks per task that ends
	// on Postgres at this size; spaced, a few tens at any size.
	const maxOpenReadPerTask = 100
	for engine, u := range engines.URLs(t, "group-wait-reads") {
		if engine == "redis" {
			// Its readings take the same short time at any size: the
			// asked poll paces them, and open tasks counted are no cost.
			continue
		}
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			q := engines.Open(t, u)
			tasks := make([]*jobq.Task, n)
			for i := range tasks {
				tasks[i] = &jobq.Task{Command: fmt.Sprintf("echo %d", i), Group: "sweep"}
			}
			if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
				t.Fatal(err)
			}
			var readings, openRead int64
			done := make(chan error, 1)
			go func() {
				_, err := q.Admin().WaitGroup(ctx, "sweep", time.Millisecond, func(c *driver.GroupCounters) error {
					readings++
					openRead += c.Open()
					return nil
				})
				done <- err
			}()
			for range n {
				e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Complete(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if openRead > maxOpenReadPerTask*n {
				t.Errorf("WaitGroup's %d readings counted %d open tasks for %d tasks (%.0f a task); want at most %d a task",
					readings, openRead, n, float64(openRead)/n, maxOpenReadPerTask)
			}
			t.Logf("%s: %d readings, %d open tasks counted", engine, readings, openRead)
		})
	}
}
