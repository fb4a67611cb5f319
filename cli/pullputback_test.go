package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestPullOfATaskPutBack: a pull whose task did not end, because it
// snoozed or because the pull was stopped while it ran, exits
// cli.ExitPutBack (75) and names the task, where it exited 0 as if the task
// had succeeded; the task stays in the queue.
func TestPullOfATaskPutBack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, command string
		stop          bool // stop the pull once the task has started
		want          string
	}{
		{"snoozed", "exit 75", false, "it was put back (snoozed)"},
		{"stopped", "sleep 60", true, "it was put back (worker stopping)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := "sqlite://" + filepath.Join(t.TempDir(), "q.db")
			if code, _, errOut := run(t, q, "push", "-c", tc.command); code != 0 {
				t.Fatalf("push: exit %d: %s", code, errOut)
			}
			at := ""
			if tc.stop {
				at = "task started"
			}
			code, stderr := runStoppedAt(t, []string{q, "pull"}, at)
			if code != cli.ExitPutBack || !strings.Contains(stderr, "did not end: "+tc.want) {
				t.Errorf("exit %d, want %d and %q; stderr:\n%s", code, cli.ExitPutBack, tc.want, stderr)
			}
			if code, out, _ := run(t, q, "size"); code != 0 || strings.TrimSpace(out) != "1" {
				t.Errorf("size after the pull: exit %d, %q; want the task still in the queue", code, out)
			}
		})
	}
}
