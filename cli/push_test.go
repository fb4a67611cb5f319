package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// pushVectors mirrors the "push" section of testdata/wire/vectors.json:
// what ai4s-jobq's push queues for the same flags and input, computed by
// testdata/wire/gen_vectors.py with ai4s-jobq's rules.
type pushVector struct {
	Name   string
	Args   []string
	Stdin  *string
	Bodies []string
	IDs    []string
}

func loadPushVectors(t *testing.T) []pushVector {
	t.Helper()
	b, err := os.ReadFile("../testdata/wire/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Push []pushVector }
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Push) == 0 {
		t.Fatal("testdata/wire/vectors.json has no push vectors; regenerate it with python3 testdata/wire/gen_vectors.py")
	}
	return v.Push
}

// pushRun runs `jobq QUEUE push ARGS` in-process on a new SQLite queue
// and returns the exit code, stdout, stderr and the queue URL.
func pushRun(t *testing.T, stdin string, args ...string) (code int, stdout, stderr, queue string) {
	t.Helper()
	queue = "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=push"
	var out, errb bytes.Buffer
	code = Run(context.Background(), append([]string{queue, "push"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String(), queue
}

// storedBodies returns the message bodies on queue, in push order.
func storedBodies(t *testing.T, queue string) []string {
	t.Helper()
	q, err := jobq.Open(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ps, err := q.Admin().Peek(context.Background(), 10000)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, p := range ps {
		bodies = append(bodies, string(p.Body))
	}
	return bodies
}

func TestPushMatchesAI4SJobq(t *testing.T) {
	t.Parallel()
	for _, v := range loadPushVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			stdin := ""
			if v.Stdin != nil {
				stdin = *v.Stdin
			}
			code, stdout, stderr, queue := pushRun(t, stdin, append(v.Args, "--print-ids")...)
			if code != ExitOK {
				t.Fatalf("push exited %d: %s", code, stderr)
			}
			if got := strings.Fields(stdout); strings.Join(got, " ") != strings.Join(v.IDs, " ") {
				t.Errorf("printed IDs %q; ai4s-jobq's are %q", got, v.IDs)
			}
			got := storedBodies(t, queue)
			if len(got) != len(v.Bodies) {
				t.Fatalf("stored %d tasks, ai4s-jobq pushes %d:\n%s", len(got), len(v.Bodies), strings.Join(got, "\n"))
			}
			for i := range got {
				if got[i] != v.Bodies[i] {
					t.Errorf("task %d\n got %s\nwant %s", i+1, got[i], v.Bodies[i])
				}
			}
		})
	}
}

func TestPushBadLineStoresThePrefixAndSaysWhereToResume(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	for i := 1; i <= 500; i++ {
		if i == 200 {
			in.WriteString("echo \xff\n") // not UTF-8
			continue
		}
		fmt.Fprintf(&in, "echo %d\n", i)
	}
	code, _, stderr, queue := pushRun(t, in.String())
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d; stderr: %s", code, ExitUsage, stderr)
	}
	for _, want := range []string{"line 200:", "not valid UTF-8", "stored 199 tasks: lines 1–199", "tail -n +200"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if n := len(storedBodies(t, queue)); n != 199 {
		t.Errorf("%d tasks stored, want the 199 lines before the bad one", n)
	}
}

func TestPushRejectsOutOfRangeRetries(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"3000000000", "-1"} {
		code, _, stderr, queue := pushRun(t, "", "-c", "echo", "--num-retries", n)
		if code != ExitUsage || !strings.Contains(stderr, `"--num-retries" flag: out of range; use a whole number from 0 to 2147483647`) {
			t.Errorf("--num-retries %s: exit %d, stderr %s; want a usage error giving the range", n, code, stderr)
		}
		if got := storedBodies(t, queue); len(got) != 0 {
			t.Errorf("--num-retries %s stored %d tasks", n, len(got))
		}
	}
}

// On a backend that keeps no result records, push --wait, wait, result
// and cancel are usage errors that say so, and push stores nothing.
func TestResultCommandsRefusedWithoutResults(t *testing.T) {
	t.Parallel()
	queue := "mem://no-results-" + strings.ReplaceAll(t.Name(), "/", "-") + "?unsupported=results"
	id := strings.Repeat("a", 32)
	for _, args := range [][]string{{"push", "--wait", "-c", "echo"}, {"wait", id}, {"result", id}, {"cancel", id}} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{queue}, args...), strings.NewReader(""), &out, &errb)
		if code != ExitUsage || !strings.Contains(errb.String(), "needs result records, which this backend does not keep") {
			t.Errorf("%s: exit %d, stderr %s; want a usage error saying the backend keeps no results", args[0], code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{queue, "size"}, strings.NewReader(""), &out, &errb); code != 0 || strings.TrimSpace(out.String()) != "0" {
		t.Errorf("size after a refused push --wait: %q (exit %d, %s); want 0", out.String(), code, errb.String())
	}
}

func TestPushDedupWindowOutsideServiceBusWarns(t *testing.T) {
	t.Parallel()
	code, _, stderr, queue := pushRun(t, "", "-c", "echo", "--dedup-window", "7d")
	if code != ExitOK || !strings.Contains(stderr, "--dedup-window applies to Service Bus queues only") {
		t.Errorf("exit %d, stderr %s; want success with a warning", code, stderr)
	}
	if n := len(storedBodies(t, queue)); n != 1 {
		t.Errorf("%d tasks stored, want 1", n)
	}
}

func TestPushDedupWindowSetsServiceBusURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		queue, want, wantErr string
	}{
		{queue: "sb://ns/q", want: "dedup_window=168h0m0s"},
		{queue: "sb://ns/q?create=true", want: "create=true&dedup_window=168h0m0s"},
		{queue: "sb://ns/q?dedup_window=168h", want: "dedup_window=168h"},
		{queue: "sb://ns/q?dedup_window=1h", wantErr: "disagrees with dedup_window=1h"},
	}
	for _, tt := range tests {
		a := &app{queue: tt.queue, log: slog.New(slog.DiscardHandler)}
		err := a.setDedupWindow(7 * 24 * time.Hour)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v; want %q", tt.queue, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.queue, err)
		case !strings.HasSuffix(a.resolved, "?"+tt.want):
			t.Errorf("%s became %s; want query %s", tt.queue, a.resolved, tt.want)
		}
	}
}

// TestPushBadLineSummaryCountsDuplicatesApart: a push stopped by a bad line
// says how many tasks it stored; lines before it whose task was queued
// already are named as duplicates, not counted as stored.
func TestPushBadLineSummaryCountsDuplicatesApart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, second, want string
		queued             int
	}{
		{"all duplicates", "echo 1\necho 2\n{bad\n", "stored 0 tasks (lines 1–2: 2 duplicates, not stored again)", 2},
		{"one new", "echo 1\necho 3\n{bad\n", "stored 1 task (lines 1–2: 1 duplicate, not stored again)", 3},
		{"none queued before", "echo 3\necho 4\n{bad\n", "stored 2 tasks: lines 1–2", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr, queue := pushRun(t, "echo 1\necho 2\n")
			if code != 0 {
				t.Fatalf("first push: exit %d: %s", code, stderr)
			}
			var out, errb bytes.Buffer
			code = Run(context.Background(), []string{queue, "push"}, strings.NewReader(tt.second), &out, &errb)
			if code != ExitUsage || !strings.Contains(errb.String(), tt.want) || !strings.Contains(errb.String(), "tail -n +3") {
				t.Errorf("second push: exit %d, stderr %q; want exit %d saying %q and resuming at line 3", code, errb.String(), ExitUsage, tt.want)
			}
			if n := len(storedBodies(t, queue)); n != tt.queued {
				t.Errorf("%d tasks queued; want %d", n, tt.queued)
			}
		})
	}
}
