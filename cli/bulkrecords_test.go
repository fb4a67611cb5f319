package cli_test

import (
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestPurgeRecordsRefusesBadInput: record states are purge's only, take
// no kind or key, and need a filter or --all; each refusal exits 2 and
// names the fix.
func TestPurgeRecordsRefusesBadInput(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"kind with a record state", []string{"purge", "--state", "succeeded", "--kind", "x", "--yes"}, "do not keep the task's kind or key: drop --kind/--key"},
		{"key with a record state", []string{"purge", "--state", "cancelled", "--key", "k", "--dry-run"}, "drop --kind/--key"},
		{"no filter", []string{"purge", "--state", "succeeded", "--yes"}, "every one of the succeeded records; narrow it with --exit-code, --error, --since or --until, or say --all"},
		{"misspelt state", []string{"purge", "--state", "canceled", "--all"}, "not a state purge takes: use dead-lettered, queued, succeeded or cancelled"},
		{"unknown state", []string{"purge", "--state", "zombie", "--all"}, "use dead-lettered, queued, succeeded or cancelled"},
		{"requeue of records", []string{"requeue", "--state", "succeeded"}, "only purge deletes (jobq QUEUE purge --state succeeded)"},
		{"cancel of records", []string{"cancel", "--state", "cancelled", "--all"}, "only purge deletes"},
		{"cancel-requested", []string{"purge", "--state", "cancel-requested", "--all"}, "not a state purge takes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expect(t, cli.ExitUsage, []string{tc.want}, append([]string{q}, tc.args...)...)
		})
	}
}

// TestPurgeRecordsByFilter: two tasks succeed and one is dead-lettered; a
// dry run of purge --state succeeded counts the two and deletes nothing,
// a bound before them matches none, the run deletes exactly them, and the
// dead letter and its record stay.
func TestPurgeRecordsByFilter(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	for _, c := range []string{"true", "echo hi", "exit 2"} {
		expect(t, cli.ExitOK, nil, q, "-q", "push", "-c", c)
	}
	expect(t, cli.ExitOK, nil, q, "-q", "worker", "--max-consecutive-failures", "5")
	expect(t, cli.ExitOK, []string{"would purge 2 succeeded records (2 scanned); dry run, nothing changed"}, q, "purge", "--state", "succeeded", "--all", "--dry-run")
	expect(t, cli.ExitOK, []string{"would purge 0 succeeded records"}, q, "purge", "--state", "succeeded", "--until", "1h", "--dry-run")
	expect(t, cli.ExitOK, []string{`"matched": 2`, `"dry_run": true`}, q, "purge", "--state", "succeeded", "--since", "1h", "--dry-run", "--json")
	expect(t, cli.ExitFailure, []string{"Purge 2 succeeded records of", "not confirmed; nothing was changed"}, q, "purge", "--state", "succeeded", "--since", "1h")
	expect(t, cli.ExitOK, []string{"purged 2 of 2 matching succeeded records (2 scanned)"}, q, "purge", "--state", "succeeded", "--since", "1h", "--yes")
	expect(t, cli.ExitOK, []string{"would purge 0 succeeded records (0 scanned)"}, q, "purge", "--state", "succeeded", "--all", "--dry-run")
	expect(t, cli.ExitOK, []string{"dead-lettered  1"}, q, "stats", "--sample", "0")
	expect(t, cli.ExitOK, []string{"would purge 1 dead letter"}, q, "purge", "--all", "--dry-run")
}
