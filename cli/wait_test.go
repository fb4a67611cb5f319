package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// memRun runs `jobq QUEUE ARGS` in-process and returns the exit code,
// stdout and stderr.
func memRun(t *testing.T, queue, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), append([]string{queue}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// memQueue is a new mem:// queue, with a shell worker (and workerArgs)
// running on it until the test ends when withWorker; it skips the test when
// the mem backend keeps no records.
func memQueue(t *testing.T, withWorker bool, workerArgs ...string) string {
	t.Helper()
	var id [6]byte
	_, _ = rand.Read(id[:])
	queue := "mem://cli-wait-" + hex.EncodeToString(id[:])
	code, _, stderr := memRun(t, queue, "", "result", strings.Repeat("0", 32))
	if strings.Contains(stderr, "does not keep") || strings.Contains(stderr, "not built yet") {
		t.Skipf("the mem backend keeps no result records in this build (needs r-core's Queue.Result and mem ResultStore):\n%s", stderr)
	}
	if code != ExitFailure || !strings.Contains(stderr, "has no result record") {
		t.Fatalf("result of an unknown ID exited %d; want 1 saying there is no record:\n%s", code, stderr)
	}
	if !withWorker {
		return queue
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		args := append([]string{queue, "worker", "--wait", "-n", "4", "--max-consecutive-failures", "-1", "--status-interval", "0", "--preemption", "off", "-qq"}, workerArgs...)
		Run(ctx, args, strings.NewReader(""), io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return queue
}

// outcomes parses the outcome lines of push --wait or wait into ID ->
// line.
func outcomes(t *testing.T, stdout string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		id, _, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("not an outcome line: %q", line)
		}
		m[id] = line
	}
	return m
}

// push --wait on a queue with a worker: one line per task, exit 1 with the
// failures by input line; all succeeding, exit 0; wait afterwards reads
// the records.
func TestPushWaitInProcess(t *testing.T) {
	t.Parallel()
	queue := memQueue(t, true)
	var in strings.Builder
	for i := 1; i <= 14; i++ {
		fmt.Fprintf(&in, "i=%d; test $((i %% 7)) -ne 0\n", i)
	}
	code, stdout, stderr := memRun(t, queue, in.String(), "push", "--wait", "-qq")
	if code != ExitFailure {
		t.Fatalf("push --wait exited %d; want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	got := outcomes(t, stdout)
	var ok, failed []string
	for id, line := range got {
		switch line {
		case id + " succeeded exit=0":
			ok = append(ok, id)
		default:
			if !strings.HasPrefix(line, id+" dead-lettered exit=1 error=") {
				t.Errorf("outcome %q; want succeeded exit=0 or dead-lettered exit=1 with the error", line)
			}
			failed = append(failed, id)
		}
	}
	if len(ok) != 12 || len(failed) != 2 {
		t.Fatalf("%d succeeded, %d failed; want 12 and 2:\n%s", len(ok), len(failed), stdout)
	}
	for _, want := range []string{"2 of 14 tasks did not succeed (2 dead-lettered):", "(line 7)\n", "(line 14)\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	// wait - after the end, IDs from standard input; --json lines.
	code, stdout, stderr = memRun(t, queue, ok[0]+"\n"+ok[1]+"\n", "wait", "-", "--json")
	if code != ExitOK {
		t.Fatalf("wait of two succeeded tasks exited %d:\n%s", code, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r resultJSON
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.State != "succeeded" || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Errorf("wait --json line %q: %+v, %v", line, r, err)
		}
	}

	// All succeeding: exit 0.
	code, stdout, stderr = memRun(t, queue, "echo a\necho b\necho c\n", "push", "--wait", "-qq")
	if code != ExitOK || len(outcomes(t, stdout)) != 3 {
		t.Fatalf("push --wait of 3 succeeding tasks exited %d; want 0 with 3 outcomes\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// cancel of a delayed task removes it; result and wait report it
// cancelled; a second cancel finds it ended.
func TestCancelInProcess(t *testing.T) {
	t.Parallel()
	queue := memQueue(t, false)
	code, stdout, stderr := memRun(t, queue, "", "push", "--print-ids", "--delay", "1h", "-c", "echo later")
	if code != ExitOK {
		t.Fatalf("push exited %d:\n%s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	code, stdout, stderr = memRun(t, queue, "", "cancel", id)
	if code != ExitOK || !strings.HasPrefix(stdout, id+" removed") {
		t.Fatalf("cancel exited %d; want 0 and removed\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = memRun(t, queue, "", "result", id)
	if code != ExitOK || !strings.Contains(stdout, "cancelled") {
		t.Errorf("result after cancel exited %d:\n%s", code, stdout)
	}
	code, stdout, stderr = memRun(t, queue, "", "wait", id)
	if code != ExitFailure || !strings.HasPrefix(stdout, id+" cancelled") || !strings.Contains(stderr, "1 of 1 task did not succeed (1 cancelled)") {
		t.Errorf("wait of a cancelled task exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = memRun(t, queue, "", "cancel", id, "--json")
	var res []cancelJSON
	if err := json.Unmarshal([]byte(stdout), &res); code != ExitOK || err != nil || len(res) != 1 || res[0].Outcome != "already-ended" || res[0].State != "cancelled" {
		t.Errorf("second cancel exited %d: %s", code, stdout)
	}
}

// push --wait prints a Go handler's return value.
func TestPushWaitPrintsHandlerValue(t *testing.T) {
	t.Parallel()
	queue := memQueue(t, false)
	q, err := jobq.Open(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	double := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		var in struct{ N int }
		if err := json.Unmarshal(job.Task.Payload, &in); err != nil {
			return err
		}
		return job.SetResult(map[string]int{"double": 2 * in.N})
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = worker.New(q, double, worker.Options{Wait: true, Logger: slog.New(slog.DiscardHandler)}).Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	code, stdout, stderr := memRun(t, queue, `{"n": 21}`+"\n", "push", "--wait", "-qq")
	if code != ExitOK || !regexp.MustCompile(`^[0-9a-f]{32} succeeded value=\{"double":42\}\n$`).MatchString(stdout) {
		t.Fatalf("push --wait exited %d; want 0 and the handler's value\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = memRun(t, queue, "", "result", strings.Fields(stdout)[0], "--json")
	var r resultJSON
	if err := json.Unmarshal([]byte(stdout), &r); code != ExitOK || err != nil || compactJSON(r.Value) != `{"double":42}` || r.ExitCode != nil {
		t.Fatalf("result --json exited %d: %s (%v); want value {\"double\":42} and no exit code", code, stdout, err)
	}
}

// push --time-limit and worker --task-time-limit stop a task that runs
// longer; it fails (dead-lettered, no retries) saying so.
func TestTimeLimitsInProcess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		workerArgs []string
		pushArgs   []string
	}{
		{"push --time-limit", nil, []string{"--time-limit", "500ms"}},
		{"worker --task-time-limit", []string{"--task-time-limit", "500ms"}, nil},
		{"push wins over the worker", []string{"--task-time-limit", "1h"}, []string{"--time-limit", "500ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			queue := memQueue(t, true, append([]string{"--kill-timeout", "1s"}, tt.workerArgs...)...)
			args := append([]string{"push", "--wait", "-qq", "-c", "sleep 60"}, tt.pushArgs...)
			code, stdout, stderr := memRun(t, queue, "", args...)
			if code != ExitFailure || !strings.Contains(stdout, " dead-lettered ") || !strings.Contains(stdout, "time limit") {
				t.Fatalf("push --wait of a task past its time limit exited %d; want 1, dead-lettered at the time limit\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}

// push --retry-backoff delays the retry of a failed task: it shows as
// delayed in stats; cancel then removes it.
func TestRetryBackoffThenCancelInProcess(t *testing.T) {
	t.Parallel()
	queue := memQueue(t, true)
	code, stdout, stderr := memRun(t, queue, "", "push", "--print-ids", "--num-retries", "3", "--retry-backoff", "1h,2h", "-c", "exit 3")
	if code != ExitOK {
		t.Fatalf("push exited %d:\n%s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	var st struct{ Delayed, Ready int }
	for deadline := time.Now().Add(30 * time.Second); st.Delayed != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the failed task never showed as delayed: %+v", st)
		}
		code, stdout, stderr = memRun(t, queue, "", "stats", "--sample", "0", "--json")
		if err := json.Unmarshal([]byte(stdout), &st); code != ExitOK || err != nil {
			t.Fatalf("stats exited %d: %v\n%s", code, err, stderr)
		}
	}
	code, stdout, stderr = memRun(t, queue, "", "cancel", id)
	if code != ExitOK || !strings.HasPrefix(stdout, id+" removed") {
		t.Fatalf("cancel of the delayed retry exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = memRun(t, queue, "", "result", id, "--json")
	var r resultJSON
	if err := json.Unmarshal([]byte(stdout), &r); code != ExitOK || err != nil || r.State != "cancelled" {
		t.Fatalf("result after cancelling the delayed retry exited %d: %s", code, stdout)
	}
}

// Where cancel is emulated (the backend cannot remove a queued task by ID),
// cancel says requested, and the worker that receives the task drops it
// unrun, recorded as cancelled.
func TestCancelRequestedInProcess(t *testing.T) {
	t.Parallel()
	queue := memQueue(t, false) + "?emulated=cancel"
	code, stdout, stderr := memRun(t, queue, "", "push", "--print-ids", "-c", "echo ran")
	if code != ExitOK {
		t.Fatalf("push exited %d:\n%s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	code, stdout, stderr = memRun(t, queue, "", "cancel", id)
	if code != ExitOK || !strings.HasPrefix(stdout, id+" requested: ") {
		t.Fatalf("cancel exited %d; want 0 and requested\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr = memRun(t, queue, "", "worker", "--preemption", "off", "-qq"); code != ExitOK {
		t.Fatalf("worker exited %d:\n%s", code, stderr)
	}
	code, stdout, stderr = memRun(t, queue, "", "wait", id, "--timeout", "1m")
	if code != ExitFailure || !strings.HasPrefix(stdout, id+" cancelled") {
		t.Fatalf("wait after the worker dropped the task exited %d; want 1 and cancelled\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
