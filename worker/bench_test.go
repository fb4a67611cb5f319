package worker_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// BenchmarkWorkerNoop measures the worker's own cost per task on SQLite:
// receive, run a handler that does nothing, complete; with one slot (the
// CLI's default) and with 16, one receiver or the default; on a local file, and
// with 1 ms added to every receive as a network round trip would.
func BenchmarkWorkerNoop(b *testing.B) {
	for _, scheme := range []string{"sqlite", rttScheme} {
		for _, bc := range []struct{ concurrency, receivers int }{{1, 0}, {16, 1}, {16, 0}} {
			name := fmt.Sprintf("%s/concurrency=%d/receivers=%d", scheme, bc.concurrency, bc.receivers)
			if bc.receivers == 0 {
				name = fmt.Sprintf("%s/concurrency=%d/receivers=default", scheme, bc.concurrency)
			}
			b.Run(name, func(b *testing.B) { benchWorkerNoop(b, scheme, bc.concurrency, bc.receivers) })
		}
	}
}

func benchWorkerNoop(b *testing.B, scheme string, concurrency, receivers int) {
	u := scheme + "://" + filepath.Join(b.TempDir(), "q.db") + "?queue=bench"
	q, err := jobq.OpenWithOptions(context.Background(), u, jobq.Options{Logger: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	pushTrueTasks(b, q)
	b.ResetTimer()
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })
	start := time.Now()
	if err := worker.Run(context.Background(), q, h, worker.Options{Concurrency: concurrency, Receivers: receivers, Logger: quietLog(), Poll: 10 * time.Millisecond}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/task")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
}

// pushTrueTasks pushes b.N distinct `true` commands to q.
func pushTrueTasks(b *testing.B, q *jobq.Queue) {
	b.Helper()
	tasks := make([]*jobq.Task, b.N)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("true # %d", i)}
	}
	if _, err := q.PushBatch(context.Background(), tasks, jobq.PushOptions{}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkShellTrue measures the shell processor on `true` tasks.
func BenchmarkShellTrue(b *testing.B) {
	q := openQueueB(b)
	pushTrueTasks(b, q)
	b.ResetTimer()
	if err := worker.Run(context.Background(), q, worker.NewShell(), worker.Options{Logger: quietLog(), Poll: 10 * time.Millisecond}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBareBashTrue is the baseline for BenchmarkShellTrue: the same
// command run in a plain loop.
func BenchmarkBareBashTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkShellTrueCheckpoints is BenchmarkShellTrue with checkpoints on
// (a file stash) for tasks that never write one: the cost of the empty
// checkpoint directory, with no stash round trip.
func BenchmarkShellTrueCheckpoints(b *testing.B) {
	u := "sqlite://" + filepath.Join(b.TempDir(), "q.db") + "?queue=bench"
	q, err := jobq.OpenWithOptions(context.Background(), u, jobq.Options{Logger: quietLog(), StashURL: "file://" + filepath.Join(b.TempDir(), "stash")})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	pushTrueTasks(b, q)
	b.ResetTimer()
	if err := worker.Run(context.Background(), q, worker.NewShell(), worker.Options{Logger: quietLog(), Poll: 10 * time.Millisecond, Checkpoints: true}); err != nil {
		b.Fatal(err)
	}
}
