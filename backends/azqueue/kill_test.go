package azqueue_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// Environment of the worker process TestKilledWorkerReruns starts (the test
// binary itself).
const (
	envKillChild = "JOBQ_TEST_KILL_CHILD_QUEUE" // the queue URL
	envKillLog   = "JOBQ_TEST_KILL_CHILD_LOG"   // the file each run is appended to
)

// TestKilledWorkerReruns measures what a SIGKILL costs on Storage Queue: a
// worker process runs short tasks and appends each one's command to a
// file when it finishes; it is killed three times mid-run and restarted,
// and a last run drains the queue. Every task must have run (nothing
// lost); a task that ran more than once was finished, or running, when a
// worker died. Finished tasks wait for their deletes only briefly (the
// worker bounds that backlog by count and time), so a kill re-runs few.
func TestKilledWorkerReruns(t *testing.T) {
	if q := os.Getenv(envKillChild); q != "" {
		runKillChild(t, q, os.Getenv(envKillLog))
		return
	}
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	t.Parallel()
	const n, kills, concurrency = 800, 3, 8
	q, raw := openQueue(t)
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("task %d", i)}
	}
	if _, err := q.PushBatch(t.Context(), tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "runs")
	for k := 0; k <= kills; k++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWorkerReruns$", "-test.count=1")
		cmd.Env = append(os.Environ(), envKillChild+"="+raw, envKillLog+"="+log)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if k == kills {
			// The last worker drains the queue and exits.
			if err := cmd.Wait(); err != nil {
				t.Fatalf("last worker: %v", err)
			}
			break
		}
		// Kill once this worker has finished 150 tasks.
		base := len(readRuns(t, log))
		for deadline := time.Now().Add(time.Minute); len(readRuns(t, log)) < base+150; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("worker %d finished %d tasks in a minute", k, len(readRuns(t, log))-base)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	runs := map[string]int{}
	for _, r := range readRuns(t, log) {
		runs[r]++
	}
	dups := 0
	for _, task := range tasks {
		switch c := runs[task.Command]; {
		case c == 0:
			t.Errorf("task %q never ran: lost", task.Command)
		case c > 1:
			dups += c - 1
		}
	}
	t.Logf("%d tasks, %d kills of a worker with %d slots: %d re-runs (%.1f per kill)", n, kills, concurrency, dups, float64(dups)/kills)
	// By construction a kill re-runs at most the tasks running (the slots)
	// and the finished ones whose deletes were pending (maxUnsettled for a
	// 32-message receive batch).
	if limit := kills * (concurrency + 32); dups > limit {
		t.Errorf("%d re-runs after %d kills, more than the backlog bounds allow (%d)", dups, kills, limit)
	}
}

// runKillChild is the worker process of TestKilledWorkerReruns.
func runKillChild(t *testing.T, rawURL, log string) {
	f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	q, err := jobq.OpenWithOptions(t.Context(), rawURL, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var mu sync.Mutex
	h := worker.HandlerFunc(func(ctx context.Context, j *worker.Job) error {
		time.Sleep(time.Millisecond) // a short task
		mu.Lock()
		defer mu.Unlock()
		// One write per run: it reaches the file even if the process is
		// killed right after.
		_, err := f.WriteString(j.Task.Command + "\n")
		return err
	})
	err = worker.Run(context.Background(), q, h, worker.Options{Concurrency: 8, Visibility: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
}

func readRuns(t *testing.T, log string) []string {
	t.Helper()
	f, err := os.Open(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out
}
