package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/cli"
)

// TestWaitSaysWhichTasksAreGone: a wait for a task that a clear deleted
// (or an ID never pushed) warns that the task is neither in the queue nor
// recorded, and its summary counts it apart from the tasks still queued,
// where it said they all "stay queued or running". The wait itself goes
// on until its timeout: a task with the ID may yet be pushed.
func TestWaitSaysWhichTasksAreGone(t *testing.T) {
	t.Parallel()
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=waitgone"
	code, out, errOut := run(t, q, "push", "--print-ids", "-c", "echo cleared")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	cleared := strings.TrimSpace(out)
	if code, out, errOut := run(t, q, "clear", "--yes"); code != 0 || strings.TrimSpace(out) != "cleared 1 task" {
		t.Fatalf("clear: exit %d, stdout %q, stderr %s; want 0 and %q", code, out, errOut, "cleared 1 task")
	}
	code, out, errOut = run(t, q, "push", "--print-ids", "-c", "echo queued")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	queued := strings.TrimSpace(out)
	const never = "0123456789abcdef0123456789abcdef"

	for _, tc := range []struct {
		name    string
		ids     []string
		warned  []string // the IDs the warning names; none when nil
		summary string
	}{
		{"cleared", []string{cleared}, []string{cleared}, "the other 1 has not ended (0 queued, running or held; 1 neither in the queue nor recorded: cleared, record expired, or not pushed yet)"},
		{"never pushed and queued", []string{never, queued}, []string{never}, "the other 2 have not ended (1 queued, running or held; 1 neither in the queue nor recorded"},
		{"queued", []string{queued}, nil, "the other 1 has not ended (queued, running or held, or not pushed yet)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{q, "wait", "--timeout", "1s"}, tc.ids...)...)
			if code != cli.ExitFailure || !strings.Contains(errOut, tc.summary) {
				t.Fatalf("wait: exit %d, stderr %q; want exit %d and %q", code, errOut, cli.ExitFailure, tc.summary)
			}
			warned := strings.Contains(errOut, "not in the queue (queued, running or held) and has no record of an end")
			if warned != (tc.warned != nil) {
				t.Fatalf("wait warned of a gone task: %v; want %v; stderr %q", warned, tc.warned != nil, errOut)
			}
			for _, id := range tc.warned {
				if !strings.Contains(errOut, "ids="+id) {
					t.Errorf("the warning does not name %s: %q", id, errOut)
				}
			}
		})
	}
}

// TestPushWaitWaitsForTheNewRun: push --wait of a task whose identical
// earlier run ended (same ID) reported that run's record at once, "all
// tasks succeeded", while the new copy sat queued. It waits for an end
// recorded since the push now; --skip-succeeded, which pushes nothing for
// such a task, reports the earlier success.
func TestPushWaitWaitsForTheNewRun(t *testing.T) {
	t.Parallel()
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=rerun"
	push := []string{q, "push", "--wait", "--wait-timeout", "1s", "-c", "echo rerun"}
	if code, _, errOut := run(t, push...); code != cli.ExitFailure || !strings.Contains(errOut, "0 of 1 task ended") {
		t.Fatalf("push --wait without a worker: exit %d, stderr %q; want a timeout", code, errOut)
	}
	if code, _, errOut := run(t, q, "worker"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	time.Sleep(1100 * time.Millisecond) // past the second push's clock slack
	code, out, errOut := run(t, push...)
	if code != cli.ExitFailure || strings.Contains(out, "succeeded") || !strings.Contains(errOut, "0 of 1 task ended") || !strings.Contains(errOut, "wait --since ") {
		t.Fatalf("push --wait of a task that ran before: exit %d, stdout %q, stderr %q; want a timeout waiting for the new run, and a resume hint with --since", code, out, errOut)
	}
	code, out, errOut = run(t, append([]string{q, "push", "--skip-succeeded"}, push[2:]...)...)
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("push --skip-succeeded --wait: exit %d, stdout %q, stderr %q; want the earlier success reported", code, out, errOut)
	}
	if code, _, errOut := run(t, q, "wait", "--since", "yesterday", "0123"); code != cli.ExitUsage || !strings.Contains(errOut, "RFC 3339") {
		t.Fatalf("wait --since yesterday: exit %d, stderr %q; want exit %d naming the format", code, errOut, cli.ExitUsage)
	}
}

// TestWaitSaysWhichTasksEndedBeforeItsSince: a task that ended with a
// record older than the time a wait counts ends from (a worker whose clock
// is behind the waiter's writes such a record for a run pushed with
// --wait) made the wait look hung, silently. It is named now, with where
// to find its outcome.
func TestWaitSaysWhichTasksEndedBeforeItsSince(t *testing.T) {
	t.Parallel()
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=waitearly"
	code, out, errOut := run(t, q, "push", "--print-ids", "-c", "echo early")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	if code, _, errOut := run(t, q, "worker"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	since := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	code, _, errOut = run(t, q, "wait", "--timeout", "1s", "--since", since, id)
	if code != cli.ExitFailure || !strings.Contains(errOut, "1 task is not in the queue and ended, but its end was recorded before") ||
		!strings.Contains(errOut, "ids="+id) || !strings.Contains(errOut, "jobq QUEUE result ID") {
		t.Fatalf("wait --since an hour ahead for an ended task: exit %d, stderr %q; want a timeout and a warning naming it", code, errOut)
	}
}
