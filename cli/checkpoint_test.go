package cli_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestCheckpointFlags: checkpoints without a stash, and a checkpoint size
// under 1 MiB, are usage errors that say what to give.
func TestCheckpointFlags(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--checkpoints"}, "need a stash"},
		{[]string{"--checkpoint-every", "5m"}, "--stash"},
		{[]string{"--checkpoints", "--stash", "file://" + t.TempDir(), "--checkpoint-max-mb", "0"}, "--checkpoint-max-mb is 0"},
	} {
		code, _, stderr := run(t, append([]string{q, "worker"}, tt.args...)...)
		if code != cli.ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("worker %v: exit %d, stderr %q; want exit %d saying %q", tt.args, code, stderr, cli.ExitUsage, tt.want)
		}
	}
}
