package cli_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

func TestBulkRefusesBadInput(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		// Each names only the states its command takes.
		{"unknown state", []string{"requeue", "--state", "zombie"}, `--state "zombie" is not a state requeue takes: use dead-lettered` + "\n"},
		{"unknown state, cancel", []string{"cancel", "--state", "zombie", "--all"}, `--state "zombie" is not a state cancel takes: use queued` + "\n"},
		{"record state, requeue", []string{"requeue", "--state", "succeeded"}, "which only purge deletes (jobq QUEUE purge --state succeeded): use dead-lettered here"},
		{"record state, cancel", []string{"cancel", "--state", "cancelled", "--all"}, "which only purge deletes (jobq QUEUE purge --state cancelled): use queued here"},
		{"cancel of dead letters", []string{"cancel", "--state", "dead-lettered", "--all"}, "cancel takes queued tasks"},
		{"failed is dead-lettered", []string{"requeue", "--state", "failed"}, "--state dead-lettered"},
		{"failed is dead-lettered, results", []string{"results", "--jsonl", "--state", "failed"}, "--state failed: the state is called dead-lettered (--state dead-lettered)"},
		{"dlq is dead-lettered, results", []string{"results", "--jsonl", "--state", "dlq"}, "--state dlq: the state is called dead-lettered (--state dead-lettered)"},
		{"exit code not a number", []string{"requeue", "--exit-code", "oom"}, "--exit-code 137"},
		{"exit code out of range", []string{"requeue", "--exit-code", "300", "--dry-run"}, "--exit-code 300 is out of range: a command exits with 0-255"},
		{"group timeout without wait", []string{"group", "g", "--timeout", "1h"}, "--timeout bounds group --wait; give --wait with it"},
		{"since unparsable", []string{"requeue", "--since", "yesterday"}, `--since "yesterday" is neither a duration ago`},
		{"until unparsable", []string{"purge", "--until", "soon", "--all"}, `--until "soon"`},
		{"since after until", []string{"requeue", "--since", "1h", "--until", "2h", "--dry-run"}, "is not before until"},
		{"since after until, JSON", []string{"requeue", "--since", "1h", "--until", "2h", "--yes", "--json"}, "is not before until"},
		{"batch out of range", []string{"requeue", "--batch", "0"}, "--batch is 0"},
		{"purge without filter", []string{"purge", "--yes"}, "no filter given: purge would touch every one of the dead letters; narrow it with --kind, --key, --exit-code, --error, --since or --until, or say --all"},
		{"cancel without filter", []string{"cancel", "--yes"}, "give task IDs to cancel"},
		{"cancel dry run without filter", []string{"cancel", "--dry-run"}, "or say --all"},
		{"cancel IDs and a filter", []string{"cancel", "--kind", "k", "0123"}, "not both"},
		{"cancel by exit code", []string{"cancel", "--exit-code", "1", "--yes"}, "filters dead letters"},
		{"requeue of queued tasks", []string{"requeue", "--state", "queued"}, "requeue takes dead letters"},
		{"requeue takes no arguments", []string{"requeue", "0123"}, `unexpected argument "0123" for "jobq requeue", which takes none`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expect(t, cli.ExitUsage, []string{tc.want}, append([]string{q}, tc.args...)...)
			// A refusal prints no summary, which would read as success.
			if _, out, _ := run(t, append([]string{q}, tc.args...)...); out != "" {
				t.Errorf("refused %v printed %q on stdout; want nothing", tc.args, out)
			}
		})
	}
}

// TestBulkByFilter: dead letters of two exit codes and queued tasks of two
// keys; a dry run counts and changes nothing, a real run without --yes on
// a non-terminal asks and, unanswered, changes nothing, and with --yes
// acts on exactly the matches.
func TestBulkByFilter(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	for _, c := range []string{"exit 137", "echo 1; exit 137", "exit 2"} {
		expect(t, cli.ExitOK, nil, q, "-q", "push", "-c", c)
	}
	expect(t, cli.ExitOK, nil, q, "-q", "worker", "--max-consecutive-failures", "5")
	expect(t, cli.ExitOK, []string{"would requeue 2 dead letters (3 scanned); dry run, nothing changed"}, q, "requeue", "--exit-code", "137", "--since", "1h", "--dry-run")
	expect(t, cli.ExitFailure, []string{"Requeue 2 dead letters of", "not confirmed; nothing was changed"}, q, "requeue", "--exit-code", "137")
	expect(t, cli.ExitOK, []string{"requeued 2 of 2 matching dead letters (3 scanned)"}, q, "requeue", "--exit-code", "137", "--yes")
	expect(t, cli.ExitOK, []string{"ready          2", "dead-lettered  1"}, q, "stats", "--sample", "0")

	for _, k := range []string{"a", "a", "b"} {
		expect(t, cli.ExitOK, nil, q, "-q", "push", "--concurrency-key", "tenant-"+k, "-c", "echo "+k+strings.Repeat("x", len(k)))
	}
	expect(t, cli.ExitOK, []string{`"matched": 0`, `"dry_run": true`}, q, "cancel", "--key", "tenant-c", "--dry-run", "--json")
	// Nothing matching without --dry-run: nothing to ask about, and not
	// reported as a dry run, which was not asked for.
	expect(t, cli.ExitOK, []string{"cancelled 0 of 0 matching queued tasks ("}, q, "cancel", "--key", "tenant-c")
	expect(t, cli.ExitOK, []string{`"matched": 0`, `"dry_run": false`}, q, "requeue", "--exit-code", "99", "--json")
	expect(t, cli.ExitOK, []string{"cancelled 1 of 1 matching queued task (4 scanned)"}, q, "cancel", "--key", "tenant-b", "--yes")
	expect(t, cli.ExitOK, []string{"purged 1 of 1 matching dead letter (1 scanned)"}, q, "purge", "--error", "status 2", "--yes")
	expect(t, cli.ExitOK, []string{"purged 3 of 3 matching queued tasks"}, q, "purge", "--state", "queued", "--all", "--yes")
	expect(t, cli.ExitOK, []string{"ready          0", "dead-lettered  0"}, q, "stats", "--sample", "0")
}

// TestRequeueDeadLetterOfQueuedTask: a dead letter whose task was pushed
// again merges into the queued copy when requeued, on SQLite as on
// Postgres and Redis (the driver contract): it counts as requeued, leaves
// the dead letters, and the task runs once. SQLite kept it dead, so it
// stayed listed and ran the task again when requeued later.
func TestRequeueDeadLetterOfQueuedTask(t *testing.T) {
	t.Parallel()
	for _, requeue := range [][]string{{"dlq", "requeue", "--all"}, {"requeue", "--yes"}, {"requeue", "--all", "--yes"}} {
		t.Run(strings.Join(requeue, " "), func(t *testing.T) {
			t.Parallel()
			q := sqliteQueue(t)
			runSteps(t, q, []cliStep{
				{[]string{"push", "-c", "exit 5"}, 0, ""},
				{[]string{"pull"}, cli.ExitFailure, ""},
				{[]string{"push", "-c", "exit 5"}, 0, ""},
			})
			code, out, errOut := run(t, append([]string{q}, requeue...)...)
			if code != 0 || !strings.Contains(out, "requeued 1") || strings.Contains(out+errOut, "not requeued") || strings.Contains(out, "moved on") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and the dead letter requeued", requeue, code, out, errOut)
			}
			expect(t, 0, []string{"ready          1", "dead-lettered  0"}, q, "stats", "--sample", "0")
		})
	}
}
