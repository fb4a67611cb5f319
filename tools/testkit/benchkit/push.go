package benchkit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// Push pushes tasks to q with PushBatch calls of at most size tasks, failing
// the benchmark on the first error. It is set-up, not timed.
func Push(b *testing.B, q *jobq.Queue, tasks []*jobq.Task, size int) {
	b.Helper()
	ctx := context.Background()
	for lo := 0; lo < len(tasks); lo += size {
		if _, err := q.PushBatch(ctx, tasks[lo:min(lo+size, len(tasks))], jobq.PushOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// PushOne times one producer pushing b.N tasks to q, one Push call each, and
// reports tasks/s and CPU per task.
func PushOne(b *testing.B, q *jobq.Queue) { PushOneFrom(b, q, 1) }

// PushOneFrom times producers goroutines pushing b.N tasks to q between
// them, one Push call each, each waiting for its reply before the next, and
// reports tasks/s and CPU per task.
func PushOneFrom(b *testing.B, q *jobq.Queue, producers int) {
	tasks := Tasks(b.N)
	ctx := context.Background()
	b.ResetTimer()
	cm := MarkCPU()
	start := time.Now()
	EachFrom(b, len(tasks), producers, func(i int) error {
		_, err := q.Push(ctx, tasks[i])
		return err
	})
	elapsed := time.Since(start)
	cm.Report(b, b.N)
	ReportRate(b, b.N, elapsed)
}

// EachFrom runs f(i) for i in 0..n-1 on producers goroutines, each taking
// the next i when its call returns, and fails the benchmark on the first
// error.
func EachFrom(b *testing.B, n, producers int, f func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range max(producers, 1) {
		wg.Go(func() {
			for failed.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					failed.Store(&err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// PushBatch times one producer pushing b.N tasks to q with PushBatch calls
// of size tasks, inFlight calls at a time (as `jobq push` does, so that
// encoding one batch overlaps the backend's work on another), and reports
// tasks/s. With inFlight 1 each call waits for the one before.
func PushBatch(b *testing.B, q *jobq.Queue, size, inFlight int) {
	tasks := Tasks(b.N)
	ctx := context.Background()
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	b.ResetTimer()
	cm := MarkCPU()
	start := time.Now()
	for lo := 0; lo < len(tasks) && failed.Load() == nil; lo += size {
		sem <- struct{}{}
		batch := tasks[lo:min(lo+size, len(tasks))]
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := q.PushBatch(ctx, batch, jobq.PushOptions{}); err != nil {
				failed.Store(&err)
			}
		})
	}
	wg.Wait()
	cm.Report(b, b.N)
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	ReportRate(b, b.N, time.Since(start))
}
