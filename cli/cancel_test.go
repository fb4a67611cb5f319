package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// printedID pushes cmd to a scratch queue of the same file and returns the
// task ID it prints: the ID the same push gets on any queue.
func printedID(t *testing.T, db, cmd string) string {
	t.Helper()
	code, out, errOut := run(t, "sqlite://"+db+"?queue=scratch", "push", "--print-ids", "-c", cmd)
	if code != 0 {
		t.Fatalf("push to the scratch queue: exit %d: %s", code, errOut)
	}
	return strings.TrimSpace(out)
}

// expect runs the jobq command and checks its exit code and that its
// output (stdout then stderr) holds each of want.
func expect(t *testing.T, wantCode int, want []string, args ...string) {
	t.Helper()
	code, out, errOut := run(t, args...)
	if code != wantCode {
		t.Fatalf("jobq %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(out+errOut, w) {
			t.Errorf("jobq %s: output lacks %q\nstdout: %s\nstderr: %s", strings.Join(args, " "), w, out, errOut)
		}
	}
}

// TestCancelBeforePush: on SQLite, which looks task IDs up, a cancel of an
// ID that no task has yet is an error: not-found, exit 1, and nothing
// recorded, so result has no record, wait names no pending cancel, and
// the task pushed later runs and succeeds.
func TestCancelBeforePush(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	q := "sqlite://" + db + "?queue=main"
	marker := filepath.Join(dir, "ran")
	cmd := "touch " + marker
	id := printedID(t, db, cmd)

	expect(t, cli.ExitFailure, []string{id + " not-found: no task with this ID is queued or running here; nothing was recorded",
		"1 of 1 task ID was not found", "check the IDs"}, q, "cancel", id)
	expect(t, cli.ExitFailure, []string{`"outcome": "not-found"`}, q, "cancel", "--json", id)
	expect(t, cli.ExitFailure, []string{"has no result record"}, q, "result", id)
	code, out, errOut := run(t, q, "wait", "--timeout", "300ms", id)
	if code != cli.ExitFailure || !strings.Contains(errOut, "timed out after") || strings.Contains(out+errOut, "cancel pending") {
		t.Errorf("wait on an ID whose cancel was not found: exit %d, want %d, a time-out and no pending cancel\nstdout: %s\nstderr: %s", code, cli.ExitFailure, out, errOut)
	}

	expect(t, 0, nil, q, "push", "-c", cmd)
	expect(t, 0, nil, q, "worker")
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the task pushed after its cancel was not found did not run: %v", err)
	}
	expect(t, 0, []string{id + " succeeded"}, q, "wait", "--timeout", "5s", id)
}

// TestDLQRequeueWait: after dlq requeue, wait waits for the new run (not
// the dead letter's record) and result has no record until it ends; the
// new run's record counts both deliveries and lists both attempts.
func TestDLQRequeueWait(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	q := "sqlite://" + db + "?queue=main"
	flag := filepath.Join(dir, "fixed")
	cmd := "test -f " + flag
	id := printedID(t, db, cmd)

	expect(t, 0, nil, q, "push", "-c", cmd)
	expect(t, 0, nil, q, "worker")
	expect(t, cli.ExitFailure, []string{id + " dead-lettered exit=1"}, q, "wait", "--timeout", "5s", id)
	expect(t, 0, []string{"requeued 1 dead letter\n"}, q, "dlq", "requeue", "--all")
	expect(t, cli.ExitFailure, []string{"timed out after", "the other 1 has not ended (queued, running or held, or not pushed yet)"}, q, "wait", "--timeout", "300ms", id)
	expect(t, cli.ExitFailure, []string{"has no result record"}, q, "result", id)

	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, 0, nil, q, "worker")
	expect(t, 0, []string{id + " succeeded exit=0"}, q, "wait", "--timeout", "5s", id)
	code, out, errOut := run(t, q, "result", "--json", id)
	if code != 0 {
		t.Fatalf("result --json: exit %d: %s", code, errOut)
	}
	var rec struct {
		DeliveryCount int `json:"delivery_count"`
		Attempts      []struct {
			Delivery int    `json:"delivery"`
			Outcome  string `json:"outcome"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("result --json: %v\n%s", err, out)
	}
	var got []string
	for _, a := range rec.Attempts {
		got = append(got, fmt.Sprintf("%d:%s", a.Delivery, a.Outcome))
	}
	if rec.DeliveryCount != 2 || strings.Join(got, " ") != "1:failure 2:success" {
		t.Errorf("the rerun's record: deliveries %d, attempts %v; want 2, [1:failure 2:success]\n%s", rec.DeliveryCount, got, out)
	}
}

// TestCancelAfterDLQRequeueSaysNoFalseHistory: a dead letter requeued and
// then cancelled while queued has run before; its record says it was
// cancelled while it waited, not "before it ran", and gives no delivery
// count it does not know.
func TestCancelAfterDLQRequeueSaysNoFalseHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	q := "sqlite://" + db + "?queue=main"
	cmd := "exit 3"
	id := printedID(t, db, cmd)
	expect(t, 0, nil, q, "push", "-c", cmd)
	expect(t, 0, nil, q, "worker")
	expect(t, 0, []string{"requeued 1 dead letter\n"}, q, "dlq", "requeue", "--all")
	expect(t, 0, nil, q, "cancel", id)
	code, out, errOut := run(t, q, "result", id)
	if code != 0 && code != cli.ExitFailure {
		t.Fatalf("result: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "cancelled while it waited in the queue") || strings.Contains(out, "before it ran") || strings.Contains(out, "deliveries") {
		t.Errorf("result of the cancelled rerun:\n%s\nwant 'cancelled while it waited in the queue', no 'before it ran' and no delivery count", out)
	}
}

// TestDLQUnknownIDFails: dlq requeue and purge of an ID that is not a dead
// letter exit 1 naming how many were not found, as cancel does, so a typo
// does not pass for done in a script (a WARN alone was hidden by -q).
func TestDLQUnknownIDFails(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "push", "-c", "exit 3")
	expect(t, 0, nil, q, "worker")
	for _, verb := range []string{"requeue", "purge"} {
		expect(t, cli.ExitFailure, []string{"1 of the 1 ID given was not " + verb + "d: it is not a dead letter"}, q, "-q", "dlq", verb, "999999", "999999")
	}
}
