package cli_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestShowAndResultOfAHeldTask: show and result of a task held until its
// parent succeeds say that it is held, what it waits for and how to drop
// it, instead of each sending the user to the other.
func TestShowAndResultOfAHeldTask(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	code, out, errOut := run(t, q, "push", "--print-ids", "-c", "echo parent")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	parent := strings.TrimSpace(out)
	code, out, errOut = run(t, q, "push", "--print-ids", "--after", parent, "-c", "echo child")
	if code != 0 {
		t.Fatalf("push --after: exit %d: %s", code, errOut)
	}
	child := strings.TrimSpace(out)
	want := []string{"task " + child + " is held: it waits for task " + parent + " to succeed", "cancel " + child}
	expect(t, cli.ExitFailure, want, q, "show", child)
	expect(t, cli.ExitFailure, append(want, "has no result record: it has not ended"), q, "result", child)
}
