package servicebus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// binary is the jobq binary the CLI tests share, built once.
var binary struct {
	once sync.Once
	path string
	err  error
}

// jobqBinary builds cmd/jobq once per test run.
func jobqBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "jobq-sb-")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "jobq")
		if out, err := exec.Command("go", "build", "-o", binary.path, "github.com/jobq/jobq/cmd/jobq").CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("build jobq: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// cliOnFreshQueue skips unless the emulator and the jobq binary are at
// hand, and returns a function that runs the binary on a fresh queue (with
// the emulator's connection string) and returns its standard output and
// error, failing the test if it exits non-zero.
func cliOnFreshQueue(t *testing.T) func(args ...string) (string, string) {
	t.Helper()
	return cliOn(t, nil)
}

// cliOn is cliOnFreshQueue with extra environment variables for the binary
// and extra parameters for the queue's URL.
func cliOn(t *testing.T, environ []string, params ...string) func(args ...string) (string, string) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	if testing.Short() {
		t.Skip("builds the jobq binary")
	}
	t.Parallel()
	bin := jobqBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	queue := newQueueURL(t, params...)
	return func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append([]string{queue}, args...)...)
		cmd.Env = append(append(os.Environ(), "JOBQ_SERVICEBUS_CONNECTION_STRING="+env.connStr), environ...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("jobq %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
}

// TestCLIEndToEnd runs the jobq binary on the emulator as a user would:
// push a task that succeeds and one that fails, run a worker until the
// queue is empty, and find the failing task, its retries spent, in the
// dead-letter sub-queue with its reason.
func TestCLIEndToEnd(t *testing.T) {
	jobq := cliOnFreshQueue(t)
	jobq("push", "-c", "echo fine")
	jobq("push", "-c", "echo doomed; exit 3", "--num-retries", "2")
	stdout, stderr := jobq("worker", "--max-consecutive-failures", "-1")
	out := stdout + stderr
	if !strings.Contains(out, "fine") || strings.Count(out, "] doomed") != 3 {
		t.Fatalf("worker output should show the good task once and the failing one three times (1 try + 2 retries):\n%s", out)
	}

	var dead []struct {
		Reason        string `json:"reason"`
		Detail        string `json:"detail"`
		DeliveryCount int    `json:"delivery_count"`
	}
	listing, _ := jobq("dlq", "list", "--json")
	if err := json.Unmarshal([]byte(listing), &dead); err != nil {
		t.Fatalf("dlq list --json: %v\n%s", err, listing)
	}
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "3") || !strings.Contains(dead[0].Detail, "doomed") {
		t.Fatalf("dead letters %+v, want the failing task with its exit status and output", dead)
	}
	if table, _ := jobq("dlq", "list"); !strings.Contains(table, "echo doomed") || !strings.Contains(table, "exited with status 3") {
		t.Fatalf("dlq list does not show the task and its reason:\n%s", table)
	}
}

// TestCLILongTask runs a task longer than the queue's lock duration with the
// worker's default visibility timeout (much longer than the lock): the
// heartbeat must follow the lock's real expiry, so the task completes once.
func TestCLILongTask(t *testing.T) {
	jobq := cliOnFreshQueue(t)
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr := jobq(args...)
		return stdout + stderr
	}
	run("push", "-c", fmt.Sprintf("sleep %d; echo finished", int(2*lockDuration/time.Second)))
	out := run("worker")
	if strings.Count(out, "] finished") != 1 || strings.Contains(out, "lease lost") {
		t.Fatalf("a task longer than the lock should run once to the end:\n%s", out)
	}
}

// TestCLIGateMissCostsNothing: a worker whose gate fails puts the task back
// without using up its retries or the queue's max delivery count, as
// docs/running-workers.md promises. Before the fix each gate miss was an abandon,
// and on a queue with a max delivery count of 2 Service Bus dead-lettered
// the task before any worker could run it.
func TestCLIGateMissCostsNothing(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	jobq := cliOn(t, []string{"JOBQ_GATE_REQUEUE_DELAY_S=1", "JOBQ_GATE_MAX_NOT_QUALIFIED=3"}, "max_delivery_count=2")
	jobq("push", "-c", "echo gated-task-ran", "--gate-cmd", "test -f "+ready)
	stdout, stderr := jobq("worker")
	if out := stdout + stderr; strings.Contains(out, "gated-task-ran") || strings.Count(out, "gate failed on this worker") != 3 {
		t.Fatalf("want three gate misses and no run:\n%s", out)
	}
	time.Sleep(1500 * time.Millisecond) // the last requeue's delay
	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr = jobq("worker")
	if out := stdout + stderr; !strings.Contains(out, "] gated-task-ran") {
		t.Fatalf("after three gate misses the task should still run once its gate passes:\n%s", out)
	}
	if listing, _ := jobq("dlq", "list", "--json"); strings.Contains(listing, "gated") {
		t.Fatalf("the task is in the dead letters:\n%s", listing)
	}
}
