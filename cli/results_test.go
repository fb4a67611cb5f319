package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

func TestTaskIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		stdin   string
		want    []string
		wantErr string
	}{
		{name: "args", args: []string{"a", "b", "a"}, want: []string{"a", "b"}},
		{name: "stdin lines", args: []string{"-"}, stdin: "a\n\n  b  \r\nc", want: []string{"a", "b", "c"}},
		{name: "args and stdin", args: []string{"x", "-"}, stdin: "y\nx\n", want: []string{"x", "y"}},
		{name: "print-ids json", args: []string{"-"}, stdin: `{"id": "a", "line": 1, "duplicate": false, "position": null}` + "\n" + `{"id":"b"}`, want: []string{"a", "b"}},
		{name: "json without id", args: []string{"-"}, stdin: "a\n{\"line\": 2}\n", wantErr: "standard input line 2"},
		{name: "empty stdin", args: []string{"-"}, stdin: "\n\n", wantErr: "no task IDs"},
		{name: "dash twice", args: []string{"-", "-"}, wantErr: "given twice"},
		{name: "empty arg", args: []string{"a", ""}, wantErr: "argument 2: an empty task ID"},
		{name: "space in arg", args: []string{"a b"}, wantErr: "white space"},
		{name: "not utf-8", args: []string{"\xff"}, wantErr: "UTF-8"},
		{name: "too long", args: []string{strings.Repeat("x", maxIDLen+1)}, wantErr: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := taskIDs(tt.args, strings.NewReader(tt.stdin))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || exitCode(err) != ExitUsage {
					t.Fatalf("taskIDs(%q) = %v, %v; want a usage error containing %q", tt.args, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("taskIDs(%q) = %q, %v; want %q", tt.args, got, err, tt.want)
			}
		})
	}
}

// Bad flag combinations and values are usage errors (exit 2) that name the
// problem, and push nothing.
func TestPushResultFlagsRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-c", "true", "--json"}, "--json changes what --print-ids and --wait print"},
		{[]string{"-c", "true", "--wait-timeout", "1m"}, "give --wait with it"},
		{[]string{"-c", "true", "--retry-backoff", "1h,1s"}, "longer than its cap"},
		{[]string{"-c", "true", "--retry-backoff", "0,1h"}, `"--retry-backoff" flag: retry-backoff base "0" is zero`},
		// The flag's error is the flag's, not the policy command's.
		{[]string{"-c", "true", "--retry-backoff", "abc"}, `"--retry-backoff" flag: invalid retry-backoff base="abc": not a duration`},
		{[]string{"-c", "true", "--retry-backoff", "10s,abc"}, `"--retry-backoff" flag: invalid retry-backoff cap="abc": not a duration`},
		{[]string{"-c", "true", "--retry-backoff", "-1s,1h"}, "negative"},
		{[]string{"-c", "true", "--time-limit", "11y"}, "not a duration"},
		{[]string{"-c", "true", "--time-limit", "4000d"}, "out of range"},
		{[]string{"-c", "true", "--time-limit", "-2h"}, "negative"},
		{[]string{"-c", "true", "--time-limit", "forever"}, "not a duration"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, stderr, queue := pushRun(t, "", tt.args...)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Fatalf("push %q exited %d; want %d with %q:\n%s", tt.args, code, ExitUsage, tt.want, stderr)
			}
			if b := storedBodies(t, queue); len(b) != 0 {
				t.Fatalf("push %q stored %d tasks; want none", tt.args, len(b))
			}
		})
	}
}

// push --retry-backoff and --time-limit reach the stored task; --wait sets
// reply_requested, as ai4s-jobq's push --wait does.
func TestPushCarriesResultFields(t *testing.T) {
	t.Parallel()
	code, _, stderr, queue := pushRun(t, "", "-c", "echo hi", "--retry-backoff", "10s,1h", "--time-limit", "2h")
	if code != 0 {
		t.Fatalf("push exited %d:\n%s", code, stderr)
	}
	q, err := jobq.Open(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ps, err := q.Admin().Peek(context.Background(), 10)
	if err != nil || len(ps) != 1 {
		t.Fatalf("peek: %d messages, %v; want 1", len(ps), err)
	}
	task := ps[0].Task
	if task.RetryBackoff != (jobq.Backoff{Base: 10 * time.Second, Cap: time.Hour}) || task.TimeLimit != 2*time.Hour || task.ReplyRequested {
		t.Fatalf("stored task: backoff %v, time limit %v, reply_requested %v; want 10s,1h, 2h, false", task.RetryBackoff, task.TimeLimit, task.ReplyRequested)
	}
}

// push --wait sets reply_requested, as ai4s-jobq's push --wait means it;
// with nobody working, --wait-timeout ends the wait with exit 1.
func TestPushWaitSetsReplyRequested(t *testing.T) {
	t.Parallel()
	code, _, stderr, queue := pushRun(t, "", "-c", "echo hi", "--wait", "--wait-timeout", "50ms")
	if code != ExitFailure || !strings.Contains(stderr, "timed out after 50ms: stopped waiting; 0 of 1 task ended") {
		t.Fatalf("push --wait --wait-timeout exited %d; want 1 saying it timed out:\n%s", code, stderr)
	}
	q, err := jobq.Open(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ps, err := q.Admin().Peek(context.Background(), 10)
	if err != nil || len(ps) != 1 || !ps[0].Task.ReplyRequested || !strings.Contains(string(ps[0].Body), `"reply_requested": true`) {
		t.Fatalf("stored %d tasks (%v); want one with reply_requested true", len(ps), err)
	}
}

// push --print-ids --json prints one object per task with its input line
// and its position.
func TestPushPrintIDsJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr, _ := pushRun(t, "echo a\necho b\necho a\n", "--print-ids", "--json")
	if code != 0 {
		t.Fatalf("push exited %d:\n%s", code, stderr)
	}
	var got []pushedJSON
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var p pushedJSON
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, p)
	}
	if len(got) != 3 || got[0].ID == got[1].ID || got[0].ID != got[2].ID || got[2].Line != 3 || !got[2].Duplicate || got[0].Duplicate {
		t.Fatalf("push --print-ids --json printed %+v; want 3 objects, lines 1..3, the third a duplicate of the first", got)
	}
	// SQLite counts exactly: the first two tasks have 0 and 1 ahead of
	// them; a duplicate has no position.
	if got[0].Position == nil || *got[0].Position != 0 || got[1].Position == nil || *got[1].Position != 1 || got[2].Position != nil {
		t.Errorf("positions %v, %v, %v; want 0, 1 and null", got[0].Position, got[1].Position, got[2].Position)
	}
}

func TestOutcomeLine(t *testing.T) {
	t.Parallel()
	one := 1
	zero := 0
	tests := []struct {
		r    jobq.Result
		want string
	}{
		{jobq.Result{ID: "a", State: driver.ResultSucceeded, ExitCode: &zero, Error: "ignored on success"}, "a succeeded exit=0"},
		{jobq.Result{ID: "b", State: driver.ResultDeadLettered, ExitCode: &one, Error: "command exited\nwith status 1"}, `b dead-lettered exit=1 error="command exited with status 1"`},
		{jobq.Result{ID: "c", State: driver.ResultSucceeded, Value: json.RawMessage("{ \"n\": 3,\n \"s\": \"x y\" }")}, `c succeeded value={"n":3,"s":"x y"}`},
		{jobq.Result{ID: "d", State: driver.ResultCancelled, Error: "cancelled"}, `d cancelled error="cancelled"`},
		{jobq.Result{ID: "e", State: driver.ResultDeadLettered, Error: "dial postgres://app:S3CRET@db/jobs: refused"}, `e dead-lettered error="dial postgres://app:xxxxx@db/jobs: refused"`},
	}
	for _, tt := range tests {
		if got := outcomeLine(&tt.r); got != tt.want {
			t.Errorf("outcomeLine(%+v) = %q; want %q", tt.r, got, tt.want)
		}
	}
}

// The failure summary counts by state, names each failed task with its
// input lines, and stops listing after maxListed.
func TestFailureSummary(t *testing.T) {
	t.Parallel()
	one := 1
	w := &waiter{a: &app{}, lines: map[string][]int{"a": {7}, "b": {14, 21}}}
	failed := []*jobq.Result{
		{ID: "a", State: driver.ResultDeadLettered, ExitCode: &one, Error: "command exited with status 1"},
		{ID: "b", State: driver.ResultDeadLettered, ExitCode: &one},
		{ID: "c", State: driver.ResultCancelled},
	}
	got := w.failureSummary(50, failed)
	for _, want := range []string{
		"3 of 50 tasks did not succeed (1 cancelled, 2 dead-lettered):",
		`  a dead-lettered exit=1 error="command exited with status 1" (line 7)`,
		"  b dead-lettered exit=1 (lines 14, 21)",
		"  c cancelled\n",
		"\nsee a task's output tail and attempts with: jobq result a",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	w.fromCommands = true
	if got := w.failureSummary(3, failed[:2]); !strings.Contains(got, "(-c 7)\n") || !strings.Contains(got, "(-c 14, 21)\n") {
		t.Errorf("a summary of -c tasks does not name them by -c position:\n%s", got)
	}
	many := make([]*jobq.Result, maxListed+5)
	for i := range many {
		many[i] = &jobq.Result{ID: "x", State: driver.ResultDeadLettered}
	}
	if got := w.failureSummary(100, many); !strings.Contains(got, "... and 5 more") || strings.Count(got, "\n  x ") != maxListed {
		t.Errorf("a long summary is not cut at %d:\n%s", maxListed, got)
	}
}

// Many IDs to resume go to a file that wait - reads back.
func TestResumeHintWritesFile(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	a := &app{}
	few := resumeHint(a, []string{"a", "b"}, time.Time{})
	if few != "resume with: jobq wait a b" {
		t.Errorf("resumeHint for two IDs, the queue from the environment = %q", few)
	}
	a.queue = "sqlite://./w.db?queue=q"
	if few := resumeHint(a, []string{"a", "b"}, time.Time{}); few != "resume with: jobq 'sqlite://./w.db?queue=q' wait a b" {
		t.Errorf("resumeHint for two IDs = %q", few)
	}
	since := time.Date(2026, 11, 29, 20, 45, 0, 500, time.FixedZone("x", 3600))
	if few := resumeHint(a, []string{"a"}, since); few != "resume with: jobq 'sqlite://./w.db?queue=q' wait --since 2026-11-29T19:45:00.0000005Z a" {
		t.Errorf("resumeHint with a time to wait since = %q", few)
	}
	ids := make([]string, maxListed+1)
	for i := range ids {
		ids[i] = strings.Repeat(string(rune('a'+i)), 3)
	}
	hint := resumeHint(a, ids, time.Time{})
	_, path, ok := strings.Cut(hint, "wait - < ")
	if !ok {
		t.Fatalf("resumeHint for %d IDs = %q; want a file to read with wait -", len(ids), hint)
	}
	path, _, _ = strings.Cut(path, " ")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := taskIDs([]string{"-"}, f)
	if err != nil || strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("the file holds %q, %v; want %q", got, err, ids)
	}
}

// result prints a record for a person: the fields it has, the output tail,
// then the attempts.
func TestPrintResult(t *testing.T) {
	t.Parallel()
	one := 1
	start := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	r := &jobq.Result{ID: "abc", State: driver.ResultDeadLettered, ExitCode: &one, Error: "command exited\nwith status 1",
		Output: "line one\nline two", Started: start, Finished: start.Add(1500 * time.Millisecond), Worker: "vm-1", Host: "vm",
		DeliveryCount: 2, ExpiresAt: start.Add(7 * 24 * time.Hour),
		Attempts: []jobq.Attempt{{Delivery: 1, Outcome: jobq.OutcomeFailure, ExitCode: &one, RetryDelay: 10 * time.Second, Detail: "command exited with status 1"},
			// A sub-second backoff (--retry-backoff 0.1s) and a stop that
			// lost less than a second printed "retried after 0s", "lost 0s".
			{Delivery: 2, Outcome: jobq.OutcomeFailure, ExitCode: &one, RetryDelay: 120 * time.Millisecond, Detail: "again"},
			{Delivery: 3, Outcome: jobq.OutcomePreempted, Lost: 150 * time.Millisecond, Saved: 2 * time.Second},
			// Without checkpoints nothing is saved: no "checkpoint saved 0s".
			{Delivery: 4, Outcome: jobq.OutcomePreempted, Lost: 3 * time.Second, Detail: "preempted"}}}
	var b strings.Builder
	if err := printResult(&b, r, false); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"task        abc\n", "state       dead-lettered\n", "exit code   1\n", "error       command exited with status 1\n",
		"ran for     1.5s\n", "worker      vm-1\n", "deliveries  2\n", "kept until  ", "\noutput (tail):\nline one\nline two\n\n",
		"retried after 10s; command exited with status 1", "retried after 100ms; again", "lost 200ms, checkpoint saved 2s; ", "lost 3s; preempted"} {
		if !strings.Contains(got, want) {
			t.Errorf("printResult lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "saved 0s") {
		t.Errorf("printResult says a checkpoint saved nothing:\n%s", got)
	}
	if strings.Contains(got, "value") {
		t.Errorf("printResult shows a value the record does not have:\n%s", got)
	}
	j := toResultJSON(&jobq.Result{ID: "v", State: driver.ResultSucceeded, Value: json.RawMessage(`{"n":1}`)})
	out, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"value":{"n":1}`, `"exit_code":null`, `"started":null`, `"attempts":[]`, `"error":""`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("result JSON lacks %s: %s", want, out)
		}
	}
}

// TestWaitInterruptedBeforeItBegan: a signal that came while push --wait
// pushed (and stopped its input) stops the wait at once, saying how to
// resume, rather than leaving it waiting for a second one. (The push
// took the signal, and the wait waited on.)
func TestWaitInterruptedBeforeItBegan(t *testing.T) {
	t.Parallel()
	queue := "mem://wait-interrupted-" + rand.Text()
	q, err := jobq.Open(t.Context(), queue)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	task, err := q.Push(t.Context(), &jobq.Task{Command: "echo never"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	w := &waiter{a: &app{queue: queue, log: slog.New(slog.DiscardHandler)}, q: q, interrupted: true}
	err = w.run(ctx, []string{task.ID})
	if exitCode(err) != ExitFailure || !strings.Contains(err.Error(), "interrupted: stopped waiting; 0 of 1 task ended") ||
		!strings.Contains(err.Error(), "wait "+task.ID) || ctx.Err() != nil {
		t.Fatalf("wait after a signal during the push = %v; want exit 1 at once, saying how to resume", err)
	}
}
