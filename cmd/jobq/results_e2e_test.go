package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// resultBackends are the queues the result tests run on: an SQLite file
// shared by the processes, Postgres and Redis. On the servers each test
// has its own queue, whose records are kept for a short retention.
func resultBackends() map[string]func(b *bench) {
	server := func(base string) func(b *bench) {
		return func(b *bench) {
			var id [4]byte
			_, _ = rand.Read(id[:])
			b.queue = base + "?queue=e2e-results-" + hex.EncodeToString(id[:])
			b.must("policy", "set", "retention", "10m")
			b.t.Cleanup(func() { b.run("clear", "--yes") })
		}
	}
	return map[string]func(b *bench){
		"sqlite":   func(b *bench) {},
		"postgres": server("postgres://postgres@127.0.0.1:5432/test"),
		"redis":    server("redis://127.0.0.1:6379/0"),
	}
}

// requireResults skips the test when the queue's backend keeps no result
// records in this build, naming what is missing.
func requireResults(b *bench) {
	b.t.Helper()
	// A read does not create the queue; clearing it (empty) does.
	b.must("clear", "--yes")
	r := b.run("result", strings.Repeat("0", 32))
	if (r.code == 2 && strings.Contains(r.stderr, "does not keep")) || strings.Contains(r.stderr, "not built yet") {
		b.t.Skipf("this build's %s backend keeps no result records (it needs the backend's driver.ResultStore, issue 27):\n%s", strings.SplitN(b.queue, ":", 2)[0], r.stderr)
	}
	if r.code != 1 || !strings.Contains(r.stderr, "has no result record") {
		b.t.Fatalf("result of an unknown ID exited %d; want 1 saying there is no record\n%s", r.code, r.stderr)
	}
}

// pipeline runs a shell pipeline in the bench directory, with $JOBQ the
// binary and $Q the queue, and returns what the last command printed and
// its exit code.
func (b *bench) pipeline(script string) result {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail; "+script)
	cmd.Dir = b.dir
	cmd.Env = append(append([]string{}, b.env...), "JOBQ="+jobqBin, "Q="+b.queue)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			b.t.Fatalf("running %s: %v", script, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// outcome is one line that push --wait or wait prints.
var outcomeRE = regexp.MustCompile(`^([0-9a-f]{32}) (succeeded|dead-lettered|cancelled)( exit=(\d+))?( error=".*")?$`)

// parseOutcomes checks that every line of out is an outcome line and
// returns the state of each ID.
func parseOutcomes(t *testing.T, out string) map[string]string {
	t.Helper()
	states := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m := outcomeRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not an outcome line: %q\nin:\n%s", line, out)
		}
		if _, dup := states[m[1]]; dup {
			t.Fatalf("task %s reported twice:\n%s", m[1], out)
		}
		states[m[1]] = m[2]
		if want := map[string]string{"succeeded": "0", "dead-lettered": "1"}[m[2]]; m[4] != want {
			t.Errorf("%q: exit=%s; want %s", line, m[4], want)
		}
	}
	return states
}

// The end-to-end test: 50 shell tasks, those with i % 7 == 0
// failing, pushed with --wait while a worker runs in the background; push
// prints each outcome, exits 1 and names the 7 failures by input line.
// Then: result --json, wait after the end, and 50 tasks that all succeed
// (exit 0).
func TestPushWaitReportsEachOutcome(t *testing.T) {
	t.Parallel()
	for name, setup := range resultBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBench(t)
			setup(b)
			requireResults(b)
			worker := b.start(nil, "worker", "--wait", "-n", "4", "--max-consecutive-failures", "-1")

			r := b.pipeline(`seq 1 50 | awk '{print "i=" $1 "; test $((i % 7)) -ne 0"}' | "$JOBQ" "$Q" push --wait`)
			if r.code != 1 {
				t.Fatalf("push --wait exited %d; want 1 (7 tasks fail)\nstdout:\n%s\nstderr:\n%s\nworker:\n%s", r.code, r.stdout, r.stderr, worker.output())
			}
			states := parseOutcomes(t, r.stdout)
			var failed []string
			count := map[string]int{}
			for id, s := range states {
				count[s]++
				if s != "succeeded" {
					failed = append(failed, id)
				}
			}
			if len(states) != 50 || count["succeeded"] != 43 || count["dead-lettered"] != 7 {
				t.Fatalf("outcomes %v of %d tasks; want 43 succeeded and 7 dead-lettered of 50:\n%s", count, len(states), r.stdout)
			}
			if !strings.Contains(r.stderr, "7 of 50 tasks did not succeed (7 dead-lettered):") {
				t.Errorf("stderr lacks the summary:\n%s", r.stderr)
			}
			for _, line := range []int{7, 14, 21, 28, 35, 42, 49} {
				if !strings.Contains(r.stderr, fmt.Sprintf("(line %d)\n", line)) {
					t.Errorf("the summary does not name line %d:\n%s", line, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "(line 1)\n") {
				t.Errorf("the summary names line 1, which succeeded:\n%s", r.stderr)
			}

			// result --json of a failed task, after the end.
			out := b.must("result", failed[0], "--json").stdout
			var rec struct {
				ID            string          `json:"id"`
				State         string          `json:"state"`
				ExitCode      *int            `json:"exit_code"`
				Error         string          `json:"error"`
				Value         json.RawMessage `json:"value"`
				Finished      *string         `json:"finished"`
				DeliveryCount int             `json:"delivery_count"`
				Attempts      []struct {
					Outcome  string `json:"outcome"`
					ExitCode *int   `json:"exit_code"`
				} `json:"attempts"`
				ExpiresAt *string `json:"expires_at"`
			}
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatalf("result --json: %v:\n%s", err, out)
			}
			if rec.ID != failed[0] || rec.State != "dead-lettered" || rec.ExitCode == nil || *rec.ExitCode != 1 ||
				!strings.Contains(rec.Error, "exited with status 1") || rec.DeliveryCount != 1 || rec.Finished == nil ||
				rec.ExpiresAt == nil || string(rec.Value) != "null" {
				t.Errorf("result --json of a failed task:\n%s", out)
			}
			if len(rec.Attempts) == 0 || rec.Attempts[len(rec.Attempts)-1].Outcome != "failure" {
				t.Errorf("result --json: attempts %+v; want the failure", rec.Attempts)
			}

			// wait after the end: reported at once, from the records.
			var ok string
			for id, s := range states {
				if s == "succeeded" {
					ok = id
					break
				}
			}
			w := b.runWith(ok+"\n"+failed[1]+"\n", nil, "wait", "-")
			if w.code != 1 || len(parseOutcomes(t, w.stdout)) != 2 || !strings.Contains(w.stderr, "1 of 2 tasks did not succeed (1 dead-lettered):\n  "+failed[1]) {
				t.Errorf("wait after the end exited %d; want 1 with both outcomes and the failure summarised\nstdout:\n%s\nstderr:\n%s", w.code, w.stdout, w.stderr)
			}
			if w := b.run("wait", ok, "--json"); w.code != 0 || !strings.Contains(w.stdout, `"state":"succeeded"`) {
				t.Errorf("wait --json of a task that succeeded exited %d; want 0 with its record\nstdout:\n%s\nstderr:\n%s", w.code, w.stdout, w.stderr)
			}

			// All succeeding: exit 0.
			r = b.pipeline(`seq 1 50 | sed 's/^/echo all-ok /' | "$JOBQ" "$Q" push --wait`)
			if r.code != 0 {
				t.Fatalf("push --wait of 50 succeeding tasks exited %d; want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			states = parseOutcomes(t, r.stdout)
			for id, s := range states {
				if s != "succeeded" {
					t.Errorf("task %s %s; want succeeded", id, s)
				}
			}
			if len(states) != 50 {
				t.Errorf("%d outcomes; want 50", len(states))
			}
		})
	}
}

// cancel removes a queued task and records it as cancelled; wait and
// result then report it; a second cancel finds it already ended.
func TestCancelQueuedTask(t *testing.T) {
	t.Parallel()
	for name, setup := range resultBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBench(t)
			setup(b)
			requireResults(b)
			id := strings.TrimSpace(b.must("push", "--print-ids", "-c", "echo never ran > ran").stdout)
			r := b.run("cancel", id)
			if r.code != 0 || !strings.HasPrefix(r.stdout, id+" removed") {
				t.Fatalf("cancel exited %d; want 0 and %q\nstdout:\n%s\nstderr:\n%s", r.code, id+" removed", r.stdout, r.stderr)
			}
			if s := b.stats(); s["ready"] != 0 || s["delayed"] != 0 {
				t.Errorf("stats after cancel: %v; want the task gone", s)
			}
			out := b.must("result", id, "--json").stdout
			if !strings.Contains(out, `"state": "cancelled"`) {
				t.Errorf("result after cancel:\n%s", out)
			}
			w := b.run("wait", id)
			if w.code != 1 || strings.TrimSpace(w.stdout) != id+" cancelled" && !strings.HasPrefix(w.stdout, id+" cancelled ") {
				t.Errorf("wait of a cancelled task exited %d; want 1 and %q\nstdout:\n%s\nstderr:\n%s", w.code, id+" cancelled", w.stdout, w.stderr)
			}
			var again []struct{ ID, Outcome, State string }
			if err := json.Unmarshal([]byte(b.must("cancel", id, "--json").stdout), &again); err != nil ||
				len(again) != 1 || again[0].Outcome != "already-ended" || again[0].State != "cancelled" {
				t.Errorf("second cancel: %+v, %v; want already-ended, cancelled", again, err)
			}
			b.must("worker")
			if lines := readLines(t, b.dir+"/ran"); len(lines) != 0 {
				t.Errorf("the cancelled task ran")
			}
		})
	}
}

// Ctrl-C stops the waiting, not the task, and says how to resume; wait
// --timeout does the same after the timeout.
func TestWaitInterruptedSaysHowToResume(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	requireResults(b)
	p := b.start(nil, "push", "--wait", "-c", "echo not run while nobody works")
	p.waitFor("msg=pushed")
	p.signal(syscall.SIGINT)
	if code := p.wait(); code != 1 {
		t.Fatalf("push --wait exited %d after Ctrl-C; want 1\n%s", code, p.output())
	}
	m := regexp.MustCompile(`resume with: jobq '[^']+' wait (?:--since \S+ )?([0-9a-f]{32})`).FindStringSubmatch(p.output())
	if !strings.Contains(p.output(), "interrupted: stopped waiting; 0 of 1 task ended") || m == nil {
		t.Fatalf("push --wait after Ctrl-C does not say what it did and how to resume:\n%s", p.output())
	}
	if got := b.size(); got != "1" {
		t.Errorf("queue size %s after Ctrl-C; want the task still queued", got)
	}
	r := b.run("wait", m[1], "--timeout", "300ms")
	if r.code != 1 || !strings.Contains(r.stderr, "timed out after 300ms: stopped waiting") || !strings.Contains(r.stderr, "' wait "+m[1]) {
		t.Errorf("wait --timeout exited %d; want 1 saying it timed out\n%s", r.code, r.stderr)
	}
	b.must("worker")
	r = b.run("wait", m[1])
	if r.code != 0 || !strings.HasPrefix(r.stdout, m[1]+" succeeded exit=0") {
		t.Errorf("wait after the worker ran the task exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// Ctrl-C while push --wait reads its input stops the push as without
// --wait, and says how to wait for the tasks it stored: a file of their
// IDs for jobq QUEUE wait -.
func TestPushWaitInterruptedWhilePushing(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	requireResults(b)
	// A full batch and half of another; the input stays open.
	stderr := b.interruptedPush(1500, "1000", "--wait")
	m := regexp.MustCompile(`the stored tasks were not waited for; resume with: jobq '[^']+' wait (?:--since \S+ )?- < (\S+) \(the 1500 IDs\)`).FindStringSubmatch(stderr)
	if !strings.Contains(stderr, "stored 1500 tasks: lines 1–1500") || m == nil {
		t.Fatalf("push --wait interrupted while pushing does not say what it stored and how to wait for it:\n%s", stderr)
	}
	t.Cleanup(func() { os.Remove(m[1]) })
	ids, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	r := b.runWith(string(ids), nil, "wait", "-", "--timeout", "200ms")
	if r.code != 1 || !strings.Contains(r.stderr, "0 of 1500 tasks ended") {
		t.Errorf("wait - < %s exited %d; want 1 with the 1500 tasks still queued:\n%s", m[1], r.code, r.stderr)
	}
}
