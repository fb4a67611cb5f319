package cli_test

import (
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestPauseScopeInput: pause and resume refuse an empty --kind or --key
// (which would otherwise name the whole queue) and a key that no task can
// carry, with exit 2 and nothing paused.
func TestPauseScopeInput(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	steps := []cliStep{
		{[]string{"pause", "--key", ""}, cli.ExitUsage, "pause --key is empty; give the key to pause, or leave out --key to pause the whole queue"},
		{[]string{"pause", "--kind", " "}, cli.ExitUsage, "pause --kind is empty"},
		{[]string{"pause", "--key", "a/b"}, cli.ExitUsage, "contains '=' or '/', which policy syntax reserves; push refuses such a key, so this pause would never apply"},
		{[]string{"stats"}, cli.ExitFailure, "does not exist"}, // nothing was opened, so nothing paused
		{[]string{"pause", "--key", "gpu"}, 0, "paused key gpu"},
		{[]string{"resume", "--key", ""}, cli.ExitUsage, "resume --key is empty"},
		{[]string{"resume"}, 0, "the whole queue was not paused"},
		{[]string{"resume", "--key", "gpu"}, 0, "resumed key gpu"},
		// A pause of a kind and a key is lifted only by a resume naming
		// both: the resume that lifts nothing says which does.
		{[]string{"pause", "--kind", "render", "--key", "gpu"}, 0, "paused kind render, key gpu"},
		{[]string{"resume", "--key", "gpu"}, 0, "key gpu was not paused; paused now: kind render, key gpu (jobq "},
		{[]string{"resume", "--key", "gpu"}, 0, " resume --kind render --key gpu)"},
		{[]string{"resume", "--kind", "render", "--key", "gpu"}, 0, "resumed kind render, key gpu"},
		{[]string{"resume"}, 0, "the whole queue was not paused\n"},
	}
	runSteps(t, q, steps)
}
