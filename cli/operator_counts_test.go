package cli_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
)

// TestOperatorMessagesCountRight: the operator commands' summaries agree
// in number with their counts ("1 task", not "1 tasks"), and the command a
// summary offers to list what failed lists it.
func TestOperatorMessagesCountRight(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "-q", "push", "--group", "only-cancelled", "-c", "exit 0 # a")
	code, out, errOut := run(t, q, "-q", "push", "--print-ids", "-c", "exit 0 # b", "--group", "one-cancelled")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	expect(t, 0, nil, q, "-q", "cancel", id)
	expect(t, 0, nil, q, "-q", "cancel", "--all", "--yes")

	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     []string
		notWant  []string
	}{
		{"cancel of one unknown ID", []string{"cancel", "nosuch"}, cli.ExitFailure,
			[]string{"1 of 1 task ID was not found"}, []string{"IDs were"}},
		{"cancel of one unknown ID of two", []string{"cancel", "nosuch", id}, cli.ExitFailure,
			[]string{"1 of 2 task IDs was not found"}, []string{"IDs were"}},
		{"cancel of two unknown IDs", []string{"cancel", "nosuch", "nosuch2"}, cli.ExitFailure,
			[]string{"2 of 2 task IDs were not found"}, nil},
		{"dlq requeue of one unknown ID", []string{"dlq", "requeue", "999"}, cli.ExitFailure,
			[]string{"1 of the 1 ID given was not requeued: it is not a dead letter"}, []string{"were not", "they are"}},
		{"dlq purge of one unknown ID of two", []string{"dlq", "purge", "999", "998"}, cli.ExitFailure,
			[]string{"2 of the 2 IDs given were not purged: they are not dead letters"}, nil},
		{"dlq requeue without IDs", []string{"dlq", "requeue"}, cli.ExitUsage,
			[]string{"dlq list"}, []string{"'jobq dlq list'"}},
		{"wait of one cancelled task", []string{"wait", id}, cli.ExitFailure,
			[]string{"1 of 1 task did not succeed (1 cancelled)"}, []string{"tasks did not"}},
		{"group of one cancelled task", []string{"group", "one-cancelled", "--wait"}, cli.ExitFailure,
			[]string{"1 of 1 task did not succeed (0 dead-lettered, 1 cancelled)", "--group one-cancelled --state cancelled"},
			[]string{"tasks did not", "--state dead-lettered", "(from 1 records)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{q}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", w, out, errOut)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out+errOut, w) {
					t.Errorf("output holds %q\nstdout: %s\nstderr: %s", w, out, errOut)
				}
			}
		})
	}
}

// TestEmptyIDIsUsageError: an empty ID is a usage error (exit 2) for show
// as for result, cancel and wait; show looked it up, exited 1 and offered
// `result ` with no ID, which exits 2.
func TestEmptyIDIsUsageError(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "-q", "push", "-c", "true")
	for _, args := range [][]string{{"show", ""}, {"result", ""}, {"cancel", ""}, {"wait", ""}} {
		code, out, errOut := run(t, append([]string{q}, args...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, "empty") || strings.Contains(errOut, "result \n") {
			t.Errorf("jobq %q: exit %d, want %d and a message saying the ID is empty\nstdout: %s\nstderr: %s", args, code, cli.ExitUsage, out, errOut)
		}
	}
}

// TestGroupLineShowsHeldTasks: the group line accounts for every open
// task. A task held until its parent succeeds is neither queued, delayed
// nor running, and the line said "0/1 ended ...; 0 queued, 0 delayed, 0
// running", a group that seems to wait for nothing.
func TestGroupLineShowsHeldTasks(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	code, out, errOut := run(t, q, "-q", "push", "--print-ids", "-c", "echo parent")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	parent := strings.TrimSpace(out)
	expect(t, 0, nil, q, "-q", "push", "--group", "kids", "--after", parent, "-c", "echo kid 1", "-c", "echo kid 2")
	expect(t, 0, []string{"kids: 0/2 ended", "0 queued, 0 delayed, 0 running, 2 held or cleared"}, q, "group", "kids")
	expect(t, 0, nil, q, "-q", "worker")
	expect(t, 0, []string{"kids: 2/2 ended"}, q, "group", "kids")
	code, out, _ = run(t, q, "group", "kids")
	if code != 0 || strings.Contains(out, "held") {
		t.Errorf("group kids once ended: exit %d, want 0 and no held tasks\n%s", code, out)
	}
}

// TestSchedulePauseResumeSayWhenNothingChanged: resume of an active
// schedule and pause of a paused one change nothing and say so (exit 0),
// as resume of a queue that is not paused does; they said "resumed
// schedule" and "paused schedule" as if they had.
func TestSchedulePauseResumeSayWhenNothingChanged(t *testing.T) {
	t.Parallel()
	runSteps(t, sqliteQueue(t), []cliStep{
		{[]string{"schedule", "add", "nightly", "0 3 * * *", "-c", "true"}, 0, "added schedule nightly"},
		{[]string{"schedule", "resume", "nightly"}, 0, "schedule nightly was not paused: it fires from its next slot ("},
		{[]string{"schedule", "pause", "nightly"}, 0, "paused schedule nightly: it fires nothing until 'schedule resume nightly'"},
		{[]string{"schedule", "pause", "nightly"}, 0, "schedule nightly was paused already: it fires nothing until 'schedule resume nightly'"},
		{[]string{"schedule", "resume", "nightly"}, 0, "resumed schedule nightly: it fires from its next slot ("},
		{[]string{"schedule", "resume", "weekly"}, cli.ExitFailure, `no schedule "weekly"`},
	})
}

// TestStoppedWaitAgreesInNumber: a wait stopped by its time-out speaks of
// one task as one ("0 of 1 tasks ended ...; the other 1 have not ended
// (they stay queued or running)" before).
func TestStoppedWaitAgreesInNumber(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, cli.ExitFailure, []string{"0 of 1 task ended, 0 did not succeed; the other 1 has not ended (it stays queued or running)"},
		q, "push", "-c", "echo never run", "--wait", "--wait-timeout", "300ms")
	expect(t, cli.ExitFailure, []string{"0 of 2 tasks ended, 0 did not succeed; the other 2 have not ended (they stay queued or running)"},
		q, "push", "-c", "echo never run 1", "-c", "echo never run 2", "--wait", "--wait-timeout", "300ms")
}

// TestScheduleAddPayloadWithCommand: -c with --payload (no --kind) names
// the flag that is missing; it said "give either -c COMMAND or --kind
// KIND ..., not both" of a --kind that was not given.
func TestScheduleAddPayloadWithCommand(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	code, _, errOut := run(t, q, "schedule", "add", "s", "@hourly", "-c", "true", "--payload", "{}")
	if code != cli.ExitUsage || !strings.Contains(errOut, "--payload needs --kind") || strings.Contains(errOut, "not both") {
		t.Errorf("schedule add -c --payload: exit %d, stderr %q; want %d and '--payload needs --kind'", code, errOut, cli.ExitUsage)
	}
}

// TestCancelHeldTaskSaysItWasNotQueued: cancel of a held task (a group's
// step, a task pushed with --after) removes it; the line said "removed:
// it was queued", which it never was.
func TestCancelHeldTaskSaysItWasNotQueued(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "-q", "push", "--group", "g", "-c", "echo a", "--then", "echo step")
	step := jobq.ThenTaskID("g")
	code, out, errOut := run(t, q, "cancel", step)
	if code != 0 || !strings.Contains(out, step+" removed before it ran") || strings.Contains(out, "it was queued;") {
		t.Errorf("cancel of the held step: exit %d\nstdout: %s\nstderr: %s\nwant 0 and 'removed before it ran', not 'it was queued'", code, out, errOut)
	}
}

// TestGroupsSaysWhenThereAreNone: groups on a queue without groups says
// so, as schedule list and dlq list do; it printed a header alone. --json
// prints nothing.
func TestGroupsSaysWhenThereAreNone(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "-q", "policy", "set", "max-depth", "10")
	for _, args := range [][]string{{"groups"}, {"groups", "--work"}} {
		code, out, errOut := run(t, append([]string{q}, args...)...)
		if code != 0 || !strings.HasPrefix(out, "no groups") || strings.Contains(out, "GROUP") {
			t.Errorf("jobq %q on a queue without groups: exit %d, stdout %q, stderr %q; want 0 and 'no groups'", args, code, out, errOut)
		}
	}
	if code, out, _ := run(t, q, "groups", "--json"); code != 0 || out != "" {
		t.Errorf("groups --json on a queue without groups: exit %d, stdout %q; want 0 and nothing", code, out)
	}
}

// TestAfterGroupThatFailedIsRefused: push --after-group of a group that
// ended with a dead-lettered or cancelled task is refused (exit 2,
// nothing stored), as --after of a dead-lettered task is: the task could
// never run. It was stored, exit 0, and cancelled by the next sweep. A
// step that runs whatever the outcome may still be held.
func TestAfterGroupThatFailedIsRefused(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "-q", "push", "--group", "bad", "-c", "exit 3")
	expect(t, 0, nil, q, "-q", "push", "--group", "open", "-c", "exit 4")
	expect(t, 0, nil, q, "-q", "worker", "--max-consecutive-failures", "-1")
	expect(t, 0, nil, q, "-q", "push", "--group", "open", "-c", "echo more")
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"ended with a dead letter", []string{"push", "-c", "echo after bad", "--after-group", "bad"}, cli.ExitUsage,
			`after-group "bad": the group ended with 1 of 1 task dead-lettered and 0 cancelled, so a task after it could never run`},
		{"open with a dead letter", []string{"push", "-c", "echo after open", "--after-group", "open"}, 0, ""},
		{"a step run whatever the outcome", []string{"group", "bad", "then", "echo step", "--then-if", "always"}, 0, "step of group bad held"},
		{"nothing stored by the refused push", []string{"size"}, 0, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{q}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d, want %d and %q\nstdout: %s\nstderr: %s", code, tc.wantCode, tc.want, out, errOut)
			}
		})
	}
}

// TestStepAfterGroupThatFailed: a step that runs only if all succeed,
// added to a group that ended with a failure, is refused with the flag
// that holds it anyway.
func TestStepAfterGroupThatFailed(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "-q", "push", "--group", "bad", "-c", "exit 3")
	expect(t, 0, nil, q, "-q", "worker")
	expect(t, cli.ExitUsage, []string{`the group ended with 1 of 1 task dead-lettered`, "--then-if always runs a step whatever the outcome"}, q, "group", "bad", "then", "echo step")
	expect(t, 0, []string{"step of group bad held"}, q, "group", "bad", "then", "echo step", "--then-if", "always")
}
