package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestWorkersExitCodes: workers on a queue without workers says so and
// exits 0, whatever its results policy; on a backend that keeps no worker
// records it says so and exits 2, as result and group do there.
func TestWorkersExitCodes(t *testing.T) {
	t.Parallel()
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=workers"
	if code, _, stderr := run(t, q, "-q", "push", "-c", "true"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	for _, policy := range []string{"", "none"} {
		if policy != "" {
			if code, _, stderr := run(t, q, "policy", "set", "results", policy); code != 0 {
				t.Fatalf("policy set results %s: exit %d: %s", policy, code, stderr)
			}
		}
		if code, stdout, stderr := run(t, q, "workers"); code != 0 || !strings.Contains(stdout, "no live or vanished workers") {
			t.Errorf("workers (results policy %q): exit %d, %q; want 0, saying there are none; stderr:\n%s", policy, code, stdout, stderr)
		}
	}
	code, _, stderr := run(t, "mem://no-registry?unsupported=worker-registry", "workers")
	if code != cli.ExitUsage || !strings.Contains(stderr, "does not support worker-registry") {
		t.Errorf("workers without a worker registry: exit %d, want %d, saying so; stderr:\n%s", code, cli.ExitUsage, stderr)
	}
}
