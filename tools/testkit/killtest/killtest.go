// Package killtest measures what a SIGKILL of a worker process costs on a
// backend. The test binary runs itself as the worker: the worker runs
// short tasks and appends each one's command to a file when it finishes;
// it is killed a few times mid-run and restarted, and a last one drains the
// queue. Every task must have run (nothing lost); a task that ran more than
// once was finished, or running, when a worker died.
//
// A backend's test calls Child first, then Run:
//
//	func TestKilledWorkerReruns(t *testing.T) {
//		if killtest.Child(t) {
//			return
//		}
//		...
//		killtest.Run(t, q, killtest.Config{Test: "TestKilledWorkerReruns", URL: raw, ...})
//	}
package killtest

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

// The worker process's environment.
const (
	envQueue       = "JOBQ_TEST_KILL_CHILD_QUEUE"       // the queue URL
	envLog         = "JOBQ_TEST_KILL_CHILD_LOG"         // the file each run is appended to
	envConcurrency = "JOBQ_TEST_KILL_CHILD_CONCURRENCY" // the worker's concurrency
	envVisibility  = "JOBQ_TEST_KILL_CHILD_VISIBILITY"  // the worker's visibility; empty: its default
)

// Config is one run of Run.
type Config struct {
	// Test is the name of the test that calls Run and Child; the worker
	// processes run it alone.
	Test string
	// URL is the queue's URL, which the worker processes open.
	URL string
	// Tasks are pushed first; Kills workers are killed, each once it has
	// finished PerRun tasks; then one more drains the queue.
	Tasks, Kills, PerRun int
	// Concurrency is each worker's; Visibility too, when not zero.
	Concurrency int
	Visibility  time.Duration
	// Env is more environment for the worker processes.
	Env []string
	// MaxReruns, when not zero, fails the test when more tasks than that
	// ran twice.
	MaxReruns int
}

// Child runs the worker process when this test binary is one, and reports
// whether it was.
func Child(t *testing.T) bool {
	raw := os.Getenv(envQueue)
	if raw == "" {
		return false
	}
	log := os.Getenv(envLog)
	f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts := worker.Options{Logger: slog.New(slog.DiscardHandler)}
	if _, err := fmt.Sscan(os.Getenv(envConcurrency), &opts.Concurrency); err != nil {
		t.Fatalf("%s: %v", envConcurrency, err)
	}
	if v := os.Getenv(envVisibility); v != "" {
		if opts.Visibility, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s: %v", envVisibility, err)
		}
	}
	q, err := jobq.OpenWithOptions(t.Context(), raw, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
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
	if err := worker.Run(context.Background(), q, h, opts); err != nil {
		t.Fatal(err)
	}
	return true
}

// Run pushes c.Tasks shell tasks to q (opened on c.URL), kills c.Kills
// worker processes in turn, drains the queue with one more, fails the test
// for every task that never ran, and returns how many runs were repeats.
func Run(t *testing.T, q *jobq.Queue, c Config) (reruns int) {
	t.Helper()
	tasks := make([]*jobq.Task, c.Tasks)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("task %d", i)}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "runs")
	env := append(os.Environ(), envQueue+"="+c.URL, envLog+"="+log, fmt.Sprintf("%s=%d", envConcurrency, c.Concurrency))
	if c.Visibility != 0 {
		env = append(env, envVisibility+"="+c.Visibility.String())
	}
	env = append(env, c.Env...)
	for k := 0; k <= c.Kills; k++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+c.Test+"$", "-test.count=1")
		cmd.Env = env
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if k == c.Kills {
			// The last worker drains the queue and exits.
			if err := cmd.Wait(); err != nil {
				t.Fatalf("last worker: %v", err)
			}
			break
		}
		base := len(readRuns(t, log))
		for deadline := time.Now().Add(time.Minute); len(readRuns(t, log)) < base+c.PerRun; time.Sleep(5 * time.Millisecond) {
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
	for _, task := range tasks {
		switch n := runs[task.Command]; {
		case n == 0:
			t.Errorf("task %q never ran: lost", task.Command)
		case n > 1:
			reruns += n - 1
		}
	}
	t.Logf("%d tasks, %d kills of a worker with %d slots: %d re-runs (%.1f per kill)",
		c.Tasks, c.Kills, c.Concurrency, reruns, float64(reruns)/float64(c.Kills))
	if c.MaxReruns > 0 && reruns > c.MaxReruns {
		t.Errorf("%d re-runs after %d kills, more than the %d allowed", reruns, c.Kills, c.MaxReruns)
	}
	return reruns
}

// readRuns returns the commands the workers appended to log, in order.
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
