package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests build the jobq binary once and run it as a subprocess on the
// SQLite backend, as a user would.

var jobqBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jobq-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	jobqBin = filepath.Join(dir, "jobq")
	build := exec.Command("go", "build", "-o", jobqBin, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building jobq:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// bench is one test's scratch directory and queue.
type bench struct {
	t     *testing.T
	dir   string
	queue string
	env   []string
}

func newBench(t *testing.T) *bench {
	t.Helper()
	dir := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBQ_") {
			env = append(env, kv)
		}
	}
	return &bench{t: t, dir: dir, queue: "sqlite://" + filepath.Join(dir, "q.db") + "?queue=e2e", env: env}
}

// result is a finished jobq run.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// command prepares jobq QUEUE args... in the bench directory.
func (b *bench) command(ctx context.Context, stdin string, extraEnv []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, jobqBin, append([]string{b.queue}, args...)...)
	cmd.Dir = b.dir
	cmd.Env = append(append([]string{}, b.env...), extraEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}

// run runs jobq QUEUE args... to completion.
func (b *bench) run(args ...string) result { return b.runWith("", nil, args...) }

func (b *bench) runWith(stdin string, extraEnv []string, args ...string) result {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := b.command(ctx, stdin, extraEnv, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			b.t.Fatalf("running jobq %v: %v", args, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// must runs jobq and fails the test unless it exits 0.
func (b *bench) must(args ...string) result {
	b.t.Helper()
	r := b.run(args...)
	if r.code != 0 {
		b.t.Fatalf("jobq %v exited %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// size runs `jobq size` and returns what it printed.
func (b *bench) size() string { return strings.TrimSpace(b.must("size").stdout) }

// stats returns the queue's counts.
func (b *bench) stats() map[string]int {
	b.t.Helper()
	r := b.must("stats", "--sample", "0", "--json")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		b.t.Fatalf("stats --json: %v: %s", err, r.stdout)
	}
	m := map[string]int{}
	for _, k := range []string{"ready", "in_flight", "delayed", "dead_lettered"} {
		var n int
		if err := json.Unmarshal(raw[k], &n); err != nil {
			b.t.Fatalf("stats --json: %s: %v: %s", k, err, r.stdout)
		}
		m[k] = n
	}
	return m
}

// proc is a jobq process running in the background.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

type lockedWriter struct{ p *proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stderr.Write(b)
}

func (b *bench) start(extraEnv []string, args ...string) *proc {
	b.t.Helper()
	p := &proc{t: b.t, done: make(chan struct{})}
	p.cmd = b.command(context.Background(), "", extraEnv, args...)
	p.cmd.Stderr = lockedWriter{p}
	if err := p.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	b.t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// interruptedPush runs jobq QUEUE push args, writes lines "echo 1" to
// "echo N" to its input and keeps it open, waits until the queue holds
// stored tasks, interrupts it (Ctrl-C), and returns its standard error once
// it has exited 1.
func (b *bench) interruptedPush(n int, stored string, args ...string) string {
	b.t.Helper()
	cmd := exec.Command(jobqBin, append([]string{b.queue, "push"}, args...)...)
	cmd.Env = b.env
	in, err := cmd.StdinPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	var lines strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&lines, "echo %d\n", i)
	}
	if _, err := in.Write([]byte(lines.String())); err != nil {
		b.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for b.size() != stored {
		if time.Now().After(deadline) {
			b.t.Fatalf("%s tasks were not stored; size %s; stderr:\n%s", stored, b.size(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		b.t.Fatal(err)
	}
	err = cmd.Wait()
	in.Close()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		b.t.Fatalf("push %v ended with %v; want exit 1; stderr:\n%s", args, err, stderr.String())
	}
	return stderr.String()
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitFor waits until the process's log contains s. A task's output is
// logged as msg="[id-prefix] LINE", so "] LINE" matches output and not the
// command echoed in the "task started" line.
func (p *proc) waitFor(s string) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.output(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %q in the log:\n%s", s, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(60 * time.Second):
		p.t.Fatalf("jobq did not exit; log:\n%s", p.output())
		return -1
	}
}

func (p *proc) signal(s syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		p.t.Fatal(err)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func TestPushThenWorkerDrains(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "echo output-one", "-c", "echo output-two >&2")
	if s := b.stats(); s["ready"] != 2 {
		t.Fatalf("stats after push: %v; want 2 ready", s)
	}
	r := b.must("worker")
	for _, want := range []string{"] output-one", "] output-two", `reason="queue empty"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("worker log lacks %q:\n%s", want, r.stderr)
		}
	}
	if got := b.size(); got != "0" {
		t.Fatalf("size after the worker: %s; want 0", got)
	}
}

func TestFailingTaskRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("policy", "set", "retry-backoff", "1ms,1ms") // retried almost at once
	b.must("push", "-c", "echo attempt >> attempts; echo failing-output; exit 1", "--num-retries", "2")
	r := b.run("worker", "--max-consecutive-failures", "5")
	if r.code != 0 {
		t.Fatalf("worker exited %d; want 0 (failures within the limit)\n%s", r.code, r.stderr)
	}
	if n := len(readLines(t, filepath.Join(b.dir, "attempts"))); n != 3 {
		t.Fatalf("task ran %d times; want 3 (1 + 2 retries)", n)
	}
	var dead []struct {
		Reason, Detail string
	}
	out := b.must("dlq", "list", "--json").stdout
	if err := json.Unmarshal([]byte(out), &dead); err != nil {
		t.Fatalf("dlq list --json: %v: %s", err, out)
	}
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "exited with status 1") || !strings.Contains(dead[0].Detail, "failing-output") {
		t.Fatalf("dead letters: %+v; want one with the exit status as reason and the output tail as detail", dead)
	}
	if s := b.stats(); s["dead_lettered"] != 1 || s["ready"] != 0 {
		t.Fatalf("stats: %v", s)
	}
	// Requeue it from the dead letters; it is ready again.
	b.must("dlq", "requeue", "--all")
	if s := b.stats(); s["dead_lettered"] != 0 || s["ready"] != 1 {
		t.Fatalf("stats after dlq requeue: %v", s)
	}
}

func TestMaxConsecutiveFailuresExits1(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	for i := range 4 {
		b.must("push", "-c", fmt.Sprintf("exit %d", i+1))
	}
	r := b.run("worker", "--max-consecutive-failures", "2")
	if r.code != 1 || !strings.Contains(r.stderr, "too many consecutive task failures") {
		t.Fatalf("worker exited %d; want 1 with a clear message:\n%s", r.code, r.stderr)
	}
	if s := b.stats(); s["dead_lettered"] != 3 || s["ready"] != 1 {
		t.Fatalf("stats: %v; want 3 dead (more than 2 failures) and 1 left", s)
	}
}

func TestEnvReachesTaskAndDoesNotLeak(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", `echo "vars=$FOO,$BAR,$JOBQ_QUEUE_NAME,${#JOBQ_TASK_ID}"`, "-e", "FOO=one", "-e", "BAR=two words")
	b.must("push", "-c", `echo "leak=${FOO:-none}"`)
	r := b.must("worker")
	if !strings.Contains(r.stderr, "] vars=one,two words,e2e,32") {
		t.Errorf("task environment not as pushed:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "] leak=none") {
		t.Errorf("one task's environment leaked into the next:\n%s", r.stderr)
	}
}

// Not parallel: it asserts a wall-clock bound (the three sleep 2
// with -n 3 in under 4 s), so it runs before the parallel tests load the
// machine.
// TestConcurrentTasks: a worker with -n 3 runs three tasks at once. Each
// task waits (up to 20 s) until all three have started, then succeeds:
// run one after another, the first would fail.
func TestConcurrentTasks(t *testing.T) {
	b := newBench(t)
	for i := range 3 {
		b.must("push", "--num-retries", "0", "-c", fmt.Sprintf(`touch started.%d; for k in $(seq 200); do [ "$(ls started.* | wc -l)" -ge 3 ] && exit 0; sleep 0.1; done; exit 1`, i))
	}
	r := b.must("worker", "-n", "3")
	if strings.Count(r.stderr, `msg="task done"`) != 3 {
		t.Fatalf("want 3 tasks done, each having seen the other two start:\n%s", r.stderr)
	}
}

func TestHeartbeatKeepsLongTaskToOneRun(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "echo run >> runs; sleep 4")
	// Two slots: if the lease lapsed, the same worker would take the task
	// again.
	r := b.must("worker", "-n", "2", "--visibility-timeout", "2s")
	if n := len(readLines(t, filepath.Join(b.dir, "runs"))); n != 1 {
		t.Fatalf("task ran %d times; want exactly once\n%s", n, r.stderr)
	}
	if !strings.Contains(r.stderr, `msg="task done"`) {
		t.Fatalf("task did not complete:\n%s", r.stderr)
	}
}

func TestKilledWorkerTaskReappears(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	// First run: records its pid and hangs; second run: succeeds.
	b.must("push", "-c", `if [ -e started ]; then echo second-run; else echo $$ > started; sleep 20; fi`)
	p := b.start(nil, "worker", "--visibility-timeout", "2s")
	p.waitFor("task started")
	for len(readLines(t, filepath.Join(b.dir, "started"))) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	p.signal(syscall.SIGKILL)
	p.wait()
	// The orphaned task process is not ours to keep.
	if pid, err := strconv.Atoi(readLines(t, filepath.Join(b.dir, "started"))[0]); err == nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if s := b.stats(); s["in_flight"] != 1 {
		t.Fatalf("stats right after SIGKILL: %v; want the task still leased", s)
	}
	time.Sleep(2500 * time.Millisecond) // the visibility timeout
	r := b.must("worker", "--visibility-timeout", "2s")
	if !strings.Contains(r.stderr, "] second-run") || !strings.Contains(r.stderr, "delivery=2") {
		t.Fatalf("the task did not come back to the new worker:\n%s", r.stderr)
	}
	if got := b.size(); got != "0" {
		t.Fatalf("size %s; want 0", got)
	}
}

// TestKilledWorkersTaskDiesWithIt: a worker killed with SIGKILL takes its
// running task's main process with it (Linux's parent-death signal), so the
// task does not run on as an orphan while its lease expires and a second
// copy starts elsewhere.
func TestKilledWorkersTaskDiesWithIt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", `echo $$ > started; sleep 30; echo finished > finished`)
	p := b.start(nil, "worker", "--visibility-timeout", "1m")
	for len(readLines(t, filepath.Join(b.dir, "started"))) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	pid, err := strconv.Atoi(readLines(t, filepath.Join(b.dir, "started"))[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	p.signal(syscall.SIGKILL)
	p.wait()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the task's bash (pid %d) still runs 10 s after its worker was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSIGTERMRequeuesRunningTask(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "sleep 30")
	p := b.start(nil, "worker")
	p.waitFor("task started")
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("worker exited %d after SIGTERM; want 0\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "task requeued") {
		t.Errorf("no requeue in the log:\n%s", p.output())
	}
	if s := b.stats(); s["ready"] != 1 || s["in_flight"] != 0 {
		t.Fatalf("stats after SIGTERM: %v; want the task ready again at once", s)
	}
}

func TestSIGUSR1FinishesRunningTaskAndTakesNoOther(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "sleep 1; echo first-finished")
	b.must("push", "-c", "echo second-ran")
	p := b.start(nil, "worker")
	p.waitFor("task started")
	p.signal(syscall.SIGUSR1)
	if code := p.wait(); code != 0 {
		t.Fatalf("worker exited %d; want 0\n%s", code, p.output())
	}
	out := p.output()
	if !strings.Contains(out, "] first-finished") || strings.Contains(out, "second-ran") {
		t.Fatalf("want the running task finished and no other started:\n%s", out)
	}
	if s := b.stats(); s["ready"] != 1 {
		t.Fatalf("stats: %v; want the second task left", s)
	}
}

func TestTimeLimitStopsAndRequeues(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "sleep 30")
	r := b.run("worker", "--time-limit", "1s")
	if r.code != 0 || !strings.Contains(r.stderr, "time limit reached") {
		t.Fatalf("worker exited %d; want 0 with the time limit logged:\n%s", r.code, r.stderr)
	}
	if r.elapsed > 10*time.Second {
		t.Fatalf("worker took %v to honour a 1 s time limit", r.elapsed)
	}
	if s := b.stats(); s["ready"] != 1 {
		t.Fatalf("stats: %v; want the task requeued", s)
	}
}

func TestTimeLimitFromEnvironment(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "sleep 30")
	r := b.runWith("", []string{"JOBQ_TIME_LIMIT=1s"}, "worker")
	if r.code != 0 || !strings.Contains(r.stderr, "time limit reached") {
		t.Fatalf("worker exited %d; want the $JOBQ_TIME_LIMIT honoured:\n%s", r.code, r.stderr)
	}
}

func TestOrphanedBackgroundProcessIsKilled(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "sleep 60 & echo $! > orphan; echo main-done")
	r := b.must("worker")
	if !strings.Contains(r.stderr, "background processes") || !strings.Contains(r.stderr, "] main-done") {
		t.Fatalf("no orphan warning:\n%s", r.stderr)
	}
	if r.elapsed > 20*time.Second {
		t.Fatalf("worker took %v; the orphan should be killed a few seconds after the task", r.elapsed)
	}
	pid, err := strconv.Atoi(readLines(t, filepath.Join(b.dir, "orphan"))[0])
	if err != nil {
		t.Fatal(err)
	}
	// Killed: gone, or a zombie waiting for init to reap it.
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		fields := strings.Fields(string(stat))
		if len(fields) > 2 && fields[2] != "Z" {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("orphan %d still running (state %s)", pid, fields[2])
		}
	}
}

func TestGatePasses(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "echo gated-task-ran", "--gate-cmd", "true")
	r := b.must("worker")
	if !strings.Contains(r.stderr, "] gated-task-ran") || !strings.Contains(r.stderr, "gate passed") {
		t.Fatalf("gated task did not run:\n%s", r.stderr)
	}
}

func TestGateFailureRequeuesWithDelay(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "echo should-not-run", "--gate-cmd", "false", "--num-retries", "1")
	r := b.runWith("", []string{"JOBQ_GATE_REQUEUE_DELAY_S=60"}, "worker")
	if r.code != 0 || strings.Contains(r.stderr, "should-not-run") {
		t.Fatalf("worker exited %d; want 0 without running the task:\n%s", r.code, r.stderr)
	}
	if r.elapsed > 15*time.Second {
		t.Fatalf("worker waited %v for a task only it had deferred", r.elapsed)
	}
	if s := b.stats(); s["delayed"] != 1 || s["dead_lettered"] != 0 {
		t.Fatalf("stats: %v; want the task delayed, not failed", s)
	}
	var peeked []struct {
		Body struct {
			NumRetries int `json:"num_retries"`
		} `json:"body"`
		VisibleAt time.Time `json:"visible_at"`
	}
	out := b.must("peek", "--json").stdout
	if err := json.Unmarshal([]byte(out), &peeked); err != nil || len(peeked) != 1 {
		t.Fatalf("peek --json: %v: %s", err, out)
	}
	if peeked[0].Body.NumRetries != 1 {
		t.Errorf("num_retries %d after the gate failed; want 1 (unchanged)", peeked[0].Body.NumRetries)
	}
	if until := time.Until(peeked[0].VisibleAt); until < 40*time.Second {
		t.Errorf("task visible again in %v; want about 60 s (JOBQ_GATE_REQUEUE_DELAY_S)", until)
	}
}

func TestGateResultIsCached(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	for i := range 3 {
		b.must("push", "-c", fmt.Sprintf("echo cached-%d", i), "--gate-cmd", "echo gate >> gate-runs")
	}
	r := b.must("worker", "-v")
	if n := len(readLines(t, filepath.Join(b.dir, "gate-runs"))); n != 1 {
		t.Fatalf("gate ran %d times for 3 tasks; want once (cached)\n%s", n, r.stderr)
	}
	if strings.Count(r.stderr, "gate result from cache") != 2 || strings.Count(r.stderr, `msg="task done"`) != 3 {
		t.Fatalf("want 2 cache hits and 3 tasks done:\n%s", r.stderr)
	}
}

func TestMalformedStdinLine(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	r := b.runWith("echo a\necho b\n{not json\necho c\n", nil, "push")
	if r.code != 2 {
		t.Fatalf("push exited %d; want 2\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "line 3") || !strings.Contains(r.stderr, "stored 2 tasks: lines 1–2") || !strings.Contains(r.stderr, "tail -n +3") {
		t.Fatalf("error does not name the line and the count:\n%s", r.stderr)
	}
	if got := b.size(); got != "2" {
		t.Fatalf("size %s; want the 2 tasks before the bad line", got)
	}
}

func TestStdinPushWithJSONKwargs(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	in := "echo plain-$X\n\n" + `{"cmd": "echo json-$NAME-$X", "env": {"NAME": "n", "X": "from-json"}}` + "\n"
	b.must("push", "-e", "X=from-flag")
	r := b.runWith(in, nil, "push", "-e", "X=from-flag", "--print-ids")
	// The blank line is a task too, as in ai4s-jobq (it runs as a no-op).
	if r.code != 0 || len(strings.Fields(r.stdout)) != 3 {
		t.Fatalf("push exited %d, ids %q; want 3 ids\n%s", r.code, r.stdout, r.stderr)
	}
	w := b.must("worker")
	for _, want := range []string{"] plain-from-flag", "] json-n-from-flag"} {
		if !strings.Contains(w.stderr, want) {
			t.Errorf("worker log lacks %q:\n%s", want, w.stderr)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"two queues", nil, []string{"--queue", "sqlite://other.db", "size"}, "two queues given"},
		{"invalid duration", nil, []string{"worker", "--visibility-timeout", "10x"}, `"--visibility-timeout" flag: not a duration`},
		{"invalid kill timeout env", []string{"JOBQ_KILL_TIMEOUT=soon"}, []string{"worker"}, "JOBQ_KILL_TIMEOUT"},
		{"invalid gate env", []string{"JOBQ_GATE_TIMEOUT_S=abc"}, []string{"worker"}, "JOBQ_GATE_TIMEOUT_S"},
		{"invalid gate cache", []string{"JOBQ_GATE_CACHE_SIZE=0"}, []string{"worker"}, "JOBQ_GATE_CACHE_SIZE"},
		{"unknown flag", nil, []string{"push", "--nope"}, "unknown flag"},
		{"bad env flag", nil, []string{"push", "-c", "true", "-e", "NOEQUALS"}, "KEY=VALUE"},
		{"bad log format", nil, []string{"size", "--log-format", "xml"}, "log-format"},
		{"negative prefetch", nil, []string{"worker", "--prefetch", "-1"}, `"--prefetch" flag: out of range; use a whole number from 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := b.runWith("", tt.env, tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 and %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

func TestUnknownSchemeAsFirstArgument(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"nosuch://host/queue", "push", "-c", "true"},
		{"--queue", "nosuch://host/queue", "size"},
	} {
		out, err := exec.Command(jobqBin, args...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "backend not available") || !strings.Contains(string(out), "sqlite") {
			t.Fatalf("jobq %v: exit %v, output:\n%s\nwant exit 2, \"backend not available\" and the available schemes", args, err, out)
		}
	}
}

func TestQueueFromEnvironment(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "true")
	cmd := exec.Command(jobqBin, "size")
	cmd.Env = append(append([]string{}, b.env...), "JOBQ_QUEUE="+b.queue)
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("size with $JOBQ_QUEUE: %v %q", err, out)
	}
}

func TestPullRunsOneTask(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "echo pulled-one")
	b.must("push", "-c", "echo pulled-two")
	r := b.must("pull")
	if strings.Count(r.stderr, `msg="task done"`) != 1 {
		t.Fatalf("pull ran other than one task:\n%s", r.stderr)
	}
	if got := b.size(); got != "1" {
		t.Fatalf("size %s after pull; want 1", got)
	}
	b.must("push", "-c", "exit 3")
	b.must("pull")
	if r := b.run("pull"); r.code != 1 {
		t.Fatalf("pull of a failing task exited %d; want 1\n%s", r.code, r.stderr)
	}
}

func TestClearKeepsDeadLetters(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "exit 1")
	b.must("worker")
	b.must("push", "-c", "true", "-c", "true # 2")
	if r := b.runWith("n\n", nil, "clear"); r.code != 1 {
		t.Fatalf("clear declined exited %d; want 1", r.code)
	}
	r := b.must("clear", "--yes")
	if !strings.Contains(r.stdout, "cleared 2") {
		t.Fatalf("clear: %s", r.stdout)
	}
	if s := b.stats(); s["ready"] != 0 || s["dead_lettered"] != 1 {
		t.Fatalf("stats after clear: %v; want dead letters kept", s)
	}
	b.must("dlq", "purge", "--all", "--yes")
	if s := b.stats(); s["dead_lettered"] != 0 {
		t.Fatalf("stats after purge: %v", s)
	}
}

func TestHelpIsComplete(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"}, {"push", "--help"}, {"worker", "--help"}, {"pull", "--help"}, {"peek", "--help"},
		{"size", "--help"}, {"stats", "--help"}, {"clear", "--help"}, {"dlq", "--help"}, {"dlq", "list", "--help"},
		{"dlq", "requeue", "--help"}, {"dlq", "purge", "--help"}, {"backends", "--help"}, {"conformance", "--help"},
		{"version", "--help"},
	} {
		out, err := exec.Command(jobqBin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage:") || !strings.Contains(string(out), "Examples:") {
			t.Errorf("jobq %v: %v\n%s", args, err, out)
		}
	}
}

func TestBackendsListsSQLite(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(jobqBin, "backends").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sqlite") || !strings.Contains(string(out), "lease-renewal") {
		t.Fatalf("backends: %v\n%s", err, out)
	}
}

func TestConformanceOnSQLite(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	// A longer lease than the default second keeps the lease checks'
	// timing tolerant of a loaded machine.
	// The export and bulk checks scaled down: the flags must reach them.
	r := b.must("conformance", "--visibility", "3s", "--records", "2000", "--bulk-tasks", "1000", "--details")
	if !strings.Contains(r.stdout, "PushReceiveComplete") || !strings.Contains(r.stdout, " 0 failed") {
		t.Fatalf("conformance table:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "from 10000 tasks to 1000") {
		t.Fatalf("the bulk checks did not run at --bulk-tasks 1000:\n%s", r.stdout)
	}
	if r := b.run("conformance", "--records", "5"); r.code != 2 || !strings.Contains(r.stderr, "--records 5") {
		t.Fatalf("conformance --records 5 exited %d; want 2 naming the flag:\n%s", r.code, r.stderr)
	}
	if got := b.size(); got != "0" {
		t.Fatalf("the given queue was touched: size %s", got)
	}
}

func TestStashCarriesLargeTask(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	// A 5 MiB task on a queue limited to 64 KiB, as on Azure Storage Queue.
	b.queue += "&max_message_bytes=65536"
	stashDir := filepath.Join(b.dir, "stash")
	stash := "file://" + stashDir
	big := "echo large-task-ran # " + strings.Repeat("x", 5<<20)
	// Through standard input: one argument may not exceed 128 KiB on Linux.
	if r := b.runWith(big+"\n", nil, "push"); r.code != 2 || !strings.Contains(r.stderr, "stash") {
		t.Fatalf("push of an oversized task without a stash exited %d; want 2 and advice about a stash:\n%s", r.code, tail(r.stderr, 4000))
	}
	if r := b.runWith(big+"\n", nil, "push", "--stash", stash); r.code != 0 {
		t.Fatalf("push with a stash exited %d:\n%s", r.code, tail(r.stderr, 4000))
	}
	r := b.runWith("", []string{"JOBQ_STASH=" + stash}, "worker")
	if r.code != 0 || !strings.Contains(r.stderr, "] large-task-ran") {
		t.Fatalf("worker exited %d; want the stashed task run:\n%s", r.code, tail(r.stderr, 4000))
	}
	// Completing the task deleted its object.
	left, err := os.ReadDir(stashDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if !e.IsDir() {
			t.Errorf("stash object %s is still there after the task completed", e.Name())
		}
	}
}

func TestSecondSignalKillsStubbornTask(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	// The task ignores SIGTERM; only the second signal's SIGKILL stops it.
	// The marker is quoted apart so that the logged command does not match.
	b.must("push", "-c", `trap "" TERM; echo "ignoring""-term"; for i in $(seq 300); do sleep 0.1; done`)
	p := b.start(nil, "worker", "--kill-timeout", "1m")
	p.waitFor("] ignoring-term")
	p.signal(syscall.SIGTERM)
	p.waitFor("SIGTERM to its process group")
	time.Sleep(300 * time.Millisecond)
	select {
	case <-p.done:
		t.Fatalf("worker exited before the second signal:\n%s", p.output())
	default:
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("worker exited %d; want 0\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "SIGKILL to its process group") {
		t.Errorf("no SIGKILL in the log:\n%s", p.output())
	}
	if s := b.stats(); s["ready"] != 1 {
		t.Fatalf("stats: %v; want the killed task requeued", s)
	}
}

// The same push as ai4s-jobq's `push -c 'echo hi' -e B=2 -e A=1
// --num-retries 3` must give the same message, so the same ID: the MD5 of
// the JSON Python's json.dumps writes for it (computed with python3).
func TestPushMatchesAI4SJobqID(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	r := b.must("push", "-c", "echo hi", "-e", "B=2", "-e", "A=1", "--num-retries", "3", "--print-ids")
	if got := strings.TrimSpace(r.stdout); got != "d79cefe6fcd640d4fec9e0eeec4fc6f4" {
		t.Fatalf("task ID %s; want ai4s-jobq's d79cefe6fcd640d4fec9e0eeec4fc6f4", got)
	}
	var peeked []struct {
		Body struct {
			Kwargs string `json:"kwargs"`
		} `json:"body"`
	}
	if err := json.Unmarshal([]byte(b.must("peek", "--json").stdout), &peeked); err != nil || len(peeked) != 1 {
		t.Fatalf("peek: %v", err)
	}
	if want := `{"cmd": "echo hi", "bg_dirsync_to": null, "env": {"B": "2", "A": "1"}}`; peeked[0].Body.Kwargs != want {
		t.Fatalf("kwargs %s; want %s", peeked[0].Body.Kwargs, want)
	}
}

// A worker does not exit while a delayed task it could run is pending.
func TestWorkerWaitsForDelayedTask(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", "echo delayed-ran", "--delay", "2s")
	if s := b.stats(); s["delayed"] != 1 || s["ready"] != 0 {
		t.Fatalf("stats after push --delay: %v; want 1 delayed", s)
	}
	r := b.must("worker")
	if !strings.Contains(r.stderr, "] delayed-ran") {
		t.Fatalf("the worker exited without waiting for the delayed task:\n%s", r.stderr)
	}
	if r.elapsed < time.Second {
		t.Fatalf("the task ran after %v; want it held back by --delay", r.elapsed)
	}
}

// tail returns the last n bytes of s, for failure messages about runs whose
// output holds a large task.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// TestUnreachableRedisIsOneError: a Redis URL whose server does not answer
// fails with exit 1 and one line naming the problem, not also go-redis's
// own log line about its pool; with -v that line is in the debug log.
func TestUnreachableRedisIsOneError(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	b := newBench(t)
	b.queue = "redis://" + addr + "/0?queue=e2e"
	r := b.run("push", "-c", "echo hi")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "cannot reach Redis") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and one line saying Redis cannot be reached", r.code, r.stderr)
	}
	if n := strings.Count(lines[0], b.queue); n != 1 {
		t.Errorf("the error names the queue URL %d times, want once: %s", n, lines[0])
	}
	if r := b.run("-v", "push", "-c", "echo hi"); !strings.Contains(r.stderr, "level=DEBUG msg=\"go-redis: ") {
		t.Errorf("with -v, stderr:\n%s\nwant go-redis's line in the debug log", r.stderr)
	}
}
