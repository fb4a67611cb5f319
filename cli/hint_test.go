package cli_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
)

// TestLibraryHintsNameTheQueue: a command the library's message suggests
// as `jobq QUEUE ...` is printed with the queue's URL, so it can be run
// as it is; it was printed with QUEUE.
func TestLibraryHintsNameTheQueue(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a second step", []string{"group", "g", "then", "echo again"}, cli.ExitUsage, "`jobq '" + q + "' cancel " + jobq.ThenTaskID("g") + "`"},
		{"an unknown group", []string{"push", "-c", "echo b", "--after-group", "nosuch"}, cli.ExitUsage, "`jobq '" + q + "' groups`"},
	}
	expect(t, 0, nil, q, "push", "--group", "g", "-c", "echo a", "--then", "echo step")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := run(t, append([]string{q}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "jobq QUEUE") {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
		})
	}
}
