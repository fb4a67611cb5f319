package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/cli"
)

// run runs the jobq command in-process and returns its exit code and
// output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// cliStep is one command of a table test on one queue: its arguments, the
// exit code it must end with, and a substring of its stdout (of its
// stderr when the code is not 0).
type cliStep struct {
	args     []string
	wantCode int
	wantOut  string
}

// runSteps runs steps in order on queue q, failing at the first that
// does not end as it should.
func runSteps(t *testing.T, q string, steps []cliStep) {
	t.Helper()
	for _, s := range steps {
		code, out, errOut := run(t, append([]string{q}, s.args...)...)
		got := out
		if code != 0 {
			got = errOut
		}
		if code != s.wantCode || !strings.Contains(got, s.wantOut) {
			t.Fatalf("jobq %s: exit %d, output %q, stderr %q; want exit %d and output containing %q",
				strings.Join(s.args, " "), code, out, errOut, s.wantCode, s.wantOut)
		}
	}
}

func sqliteQueue(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=policies"
}

func TestPolicyCommands(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	steps := []cliStep{
		{[]string{"policy", "set", "concurrency", "gpu=2"}, 0, "set concurrency gpu=2"},
		{[]string{"policy", "set", "rate", "api=10/1m"}, 0, "set rate api=10/1m"},
		{[]string{"policy", "set", "max-depth", "2"}, 0, "set max-depth 2"},
		{[]string{"policy", "set", "concurrency", "gpu=0"}, cli.ExitUsage, "must be positive"},
		{[]string{"policy", "set", "rate", "api=1/0s"}, cli.ExitUsage, "positive"},
		{[]string{"policy", "set", "rate", "api=1/inf"}, cli.ExitUsage, "not finite"},
		{[]string{"policy", "set", "colour", "x=1"}, cli.ExitUsage, "unknown policy kind"},
		{[]string{"policy", "set", "max-depth", "-5"}, cli.ExitUsage, "put -- before it to pass -5 as a value"},
		{[]string{"policy", "set", "retention", "--", "-1h"}, cli.ExitUsage, "it is negative; use 1s to 3650d"},
		{[]string{"policy", "list"}, 0, "concurrency gpu=2\nrate api=10/1m\nmax-depth 2\n"},
		{[]string{"push", "-c", "echo 1", "--concurrency-key", "gpu"}, 0, ""},
		{[]string{"push", "-c", "echo 2", "--rate-limit-key", "api"}, 0, ""},
		{[]string{"push", "-c", "echo 3"}, cli.ExitFailure, "queue is full: 2 of max-depth 2"},
		{[]string{"stats", "--sample", "0"}, 0, "concurrency  gpu  0"},
		{[]string{"policy", "unset", "max-depth"}, 0, "unset max-depth"},
		{[]string{"policy", "unset", "max-depth"}, 0, "no max-depth policy was set"},
		{[]string{"push", "-c", "echo 3"}, 0, ""},
		{[]string{"policy", "set", "retention", "2d"}, 0, "set retention "},
		{[]string{"policy", "set", "retry-backoff", "10s,1h"}, 0, "set retry-backoff 10s,1h"},
		{[]string{"policy", "set", "retention", "0"}, cli.ExitUsage, "retention"},
		{[]string{"policy", "set", "retention", "forever"}, cli.ExitUsage, "retention"},
		{[]string{"policy", "set", "retry-backoff", "1h,10s"}, cli.ExitUsage, "longer than its cap"},
		{[]string{"policy", "set", "retry-backoff", "abc"}, cli.ExitUsage, `jobq policy: invalid retry-backoff base="abc": not a duration`},
		{[]string{"policy", "list"}, 0, "\nretry-backoff 10s,1h\n"},
		{[]string{"policy", "list", "--json"}, 0, `"kind": "retention",
    "period_s": 172800`},
		{[]string{"policy", "list", "--json"}, 0, `"kind": "retry-backoff",
    "base_s": 10,
    "cap_s": 3600`},
		{[]string{"policy", "unset", "retention"}, 0, "unset retention"},
		{[]string{"policy", "unset", "retry-backoff"}, 0, "unset retry-backoff"},
	}
	runSteps(t, q, steps)
}

// TestPushWaitForRoom: a push onto a full queue waits until a completion
// makes room, then succeeds.
func TestPushWaitForRoom(t *testing.T) {
	t.Parallel()
	url := sqliteQueue(t)
	for _, args := range [][]string{{"policy", "set", "max-depth", "1"}, {"push", "-c", "echo first"}} {
		if code, _, errOut := run(t, append([]string{url}, args...)...); code != 0 {
			t.Fatalf("jobq %v: exit %d: %s", args, code, errOut)
		}
	}
	done := make(chan int, 1)
	go func() {
		code, _, _ := run(t, url, "push", "--wait-for-room", "-c", "echo second")
		done <- code
	}()
	// The waiting push must not finish while the queue is full.
	select {
	case code := <-done:
		t.Fatalf("push --wait-for-room returned (exit %d) while the queue was full", code)
	case <-time.After(300 * time.Millisecond):
	}
	q, err := jobq.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Complete(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("push --wait-for-room exited %d after room was made", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("push --wait-for-room did not finish after room was made")
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 1 {
		t.Errorf("queue size after the waiting push: %d, %v; want 1", n, err)
	}
}

// TestShowAttemptHistory: after a worker ran a failing task to the dead
// letters, show and dlq list --json give its attempts with exit codes.
func TestShowAttemptHistory(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	code, out, errOut := run(t, q, "push", "--print-ids", "--num-retries", "1", "--retry-backoff", "1ms", "-c", "exit 3")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	if code, _, errOut := run(t, q, "-q", "worker", "--max-consecutive-failures", "-1"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	code, out, errOut = run(t, q, "show", id, "--json")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	var shown struct {
		State    string `json:"state"`
		Attempts []struct {
			Delivery int    `json:"delivery"`
			Outcome  string `json:"outcome"`
			ExitCode *int   `json:"exit_code"`
			Worker   string `json:"worker"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("show --json printed %q: %v", out, err)
	}
	if shown.State != "dead-lettered" || len(shown.Attempts) != 2 {
		t.Fatalf("show: state %q, %d attempts; want dead-lettered with 2 (%s)", shown.State, len(shown.Attempts), out)
	}
	for i, a := range shown.Attempts {
		if a.Delivery != i+1 || a.Outcome != "failure" || a.ExitCode == nil || *a.ExitCode != 3 || a.Worker == "" {
			t.Errorf("attempt %d: %+v; want delivery %d, failure with exit code 3 and a worker", i+1, a, i+1)
		}
	}
	if code, _, errOut := run(t, q, "show", "no-such-task"); code != cli.ExitFailure || !strings.Contains(errOut, "no task or message") ||
		!strings.Contains(errOut, "dead letters; a task") || !strings.Contains(errOut, " '"+q+"' result no-such-task") {
		t.Errorf("show of an unknown ID: exit %d, %q; want exit 1 saying no task, with the result command for this queue", code, errOut)
	}
}

// TestResultsPolicyCommands: `policy set results` takes all, failed or
// none; under none, push --wait is refused before anything is pushed, and
// wait and result refuse, each naming the policy and how to change it.
func TestResultsPolicyCommands(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	steps := []cliStep{
		{[]string{"policy", "set", "results", "some"}, cli.ExitUsage, "use all, failed or none"},
		{[]string{"policy", "set", "results", "failed"}, 0, "set results failed"},
		{[]string{"policy", "list", "--json"}, 0, `"value": "failed"`},
		{[]string{"policy", "set", "results", "none"}, 0, "set results none"},
		{[]string{"policy", "list"}, 0, "results none\n"},
		{[]string{"push", "--wait", "-c", "echo hi"}, cli.ExitUsage, "results policy is none"},
		{[]string{"size"}, 0, "0"},
		{[]string{"wait", "0123456789abcdef0123456789abcdef"}, cli.ExitFailure, "policy set results all"},
		{[]string{"result", "0123456789abcdef0123456789abcdef"}, cli.ExitFailure, "policy set results all"},
		{[]string{"policy", "unset", "results"}, 0, "unset results"},
	}
	runSteps(t, q, steps)
}

// TestWaitUnderResultsNoneNoResume: wait under results none is refused,
// and the refusal offers no `jobq QUEUE wait` to resume with (it would be
// refused the same way), nor claims that the tasks have not ended.
func TestWaitUnderResultsNoneNoResume(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	if code, _, errOut := run(t, q, "policy", "set", "results", "none"); code != 0 {
		t.Fatalf("policy set results none: exit %d: %s", code, errOut)
	}
	code, _, errOut := run(t, q, "wait", "0123456789abcdef0123456789abcdef")
	if code != cli.ExitFailure || !strings.Contains(errOut, "policy set results all") || strings.Contains(errOut, "resume with") || strings.Contains(errOut, "not ended") {
		t.Fatalf("wait under results none: exit %d, %q; want exit 1 naming the policy, without a resume hint", code, errOut)
	}
}

// TestCancelOfDeadLetterUnderResultsNone: under results none a dead
// letter keeps no record, so cancel finds no task of its ID; the refusal
// says that an ended or dead-lettered task reads so there, and where the
// dead letters are, where it said only to check the IDs.
func TestCancelOfDeadLetterUnderResultsNone(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "-q", "policy", "set", "results", "none")
	_, out, _ := run(t, q, "-q", "push", "--print-ids", "-c", "exit 5")
	expect(t, 0, nil, q, "-q", "worker", "--max-consecutive-failures", "5")
	expect(t, cli.ExitFailure, []string{"under the results policy none an ended or dead-lettered task reads so too", "dlq list"}, q, "cancel", strings.TrimSpace(out))
}

// TestPushWaitForRoomLargerThanMaxDepth: push --wait-for-room of more
// lines than the queue's max-depth goes in parts that fit the room left
// (here a delayed task holds one of three places), as consumers make
// room, in order and each once, instead of failing at once on a batch
// that could never fit or waiting for an empty queue.
func TestPushWaitForRoomLargerThanMaxDepth(t *testing.T) {
	t.Parallel()
	url := sqliteQueue(t)
	for _, args := range [][]string{{"policy", "set", "max-depth", "3"}, {"push", "--delay", "1h", "-c", "echo later"}} {
		if code, _, errOut := run(t, append([]string{url}, args...)...); code != 0 {
			t.Fatalf("jobq %v: exit %d: %s", args, code, errOut)
		}
	}
	q, err := jobq.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const lines = 7
	var input strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&input, "echo %d\n", i)
	}
	done := make(chan int, 1)
	go func() {
		code, _, _ := runIn(t, input.String(), url, "push", "--wait-for-room")
		done <- code
	}()
	var got []string
	for len(got) < lines {
		e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Wait: 30 * time.Second})
		if err != nil || e == nil {
			t.Fatalf("receive after %v: %v, %v", got, e, err)
		}
		got = append(got, strings.TrimSpace(e.Task.Command)) // a stdin line keeps its newline, as in ai4s-jobq
		if err := e.Complete(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if code := <-done; code != 0 {
		t.Fatalf("push --wait-for-room of %d lines under max-depth 3 exited %d", lines, code)
	}
	for i, c := range got {
		if want := fmt.Sprintf("echo %d", i+1); c != want {
			t.Fatalf("received %q; want the lines in order, each once", got)
		}
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 1 {
		t.Errorf("queue size after the push: %d, %v; want 1 (the delayed task)", n, err)
	}
}

// TestSpaceInRelativeSQLitePath: sqlite://my dir/q.db puts the space in
// the URL's host, which does not parse; the error said only that it "is
// not a queue", suggesting sqlite://./work.db. It now says to start the
// path with ./, which opens the file (%20 does not parse in a host).
func TestSpaceInRelativeSQLitePath(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "my dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	code, _, errOut := run(t, "sqlite://my dir/q.db?queue=a", "push", "-c", "true")
	if code != cli.ExitUsage || !strings.Contains(errOut, "cannot hold a space (for sqlite://, the first directory of a relative path): start the path with ./") {
		t.Fatalf("push to sqlite://my dir/q.db: exit %d, stderr %q; want a usage error saying how to write the space", code, errOut)
	}
	runSteps(t, "sqlite://./my dir/q.db?queue=a", []cliStep{{[]string{"push", "-c", "true"}, 0, ""}})
	runSteps(t, "sqlite://./my%20dir/q.db?queue=a", []cliStep{{[]string{"size"}, 0, "1"}})
}
