package servicebus_test

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
// binary itself, on the parent's emulator).
const (
	envKillChild = "JOBQ_TEST_KILL_CHILD_QUEUE" // the queue URL
	envKillLog   = "JOBQ_TEST_KILL_CHILD_LOG"   // the file each run is appended to
)

// TestKilledWorkerReruns measures what a SIGKILL costs on Service Bus: a
// worker process runs short tasks and appends each one's command to a file
// when it finishes; it is killed three times mid-run and restarted, and a
// last run drains the queue. Every task must have run (nothing lost); a
// task that ran more than once was finished, or running, when a worker
// died. Each completion is its own disposition (CompleteBatch 1), so
// finished tasks wait for their acknowledgement only briefly.
func TestKilledWorkerReruns(t *testing.T) {
	if q := os.Getenv(envKillChild); q != "" {
		runKillChild(t, q, os.Getenv(envKillLog))
		return
	}
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	const n, kills, concurrency, perRun = 600, 3, 8, 100
	raw := newQueueURL(t)
	q, _ := open(t, raw)
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("task %d", i)}
	}
	if _, err := q.PushBatch(ctxT(t), tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "runs")
	for k := 0; k <= kills; k++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWorkerReruns$", "-test.count=1")
		cmd.Env = append(os.Environ(), envKillChild+"="+raw, envKillLog+"="+log,
			"JOBQ_TEST_SERVICEBUS_CONNECTION_STRING="+env.connStr)
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
		base := len(readRuns(t, log))
		for deadline := time.Now().Add(time.Minute); len(readRuns(t, log)) < base+perRun; time.Sleep(5 * time.Millisecond) {
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
	if err := worker.Run(context.Background(), q, h, worker.Options{Concurrency: 8, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
}

func readRuns(t *testing.T, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out
}
