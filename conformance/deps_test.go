package conformance_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryLinksNoTesting: the jobq binary runs the conformance checks
// (`jobq QUEUE conformance`) without linking the testing package, which
// only this package's Run and RunStash need.
func TestBinaryLinksNoTesting(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.CommandContext(t.Context(), gobin, "list", "-deps", "github.com/jobq/jobq/cmd/jobq").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/jobq: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/jobq/jobq/internal/confsuite") {
		t.Fatalf("go list -deps ./cmd/jobq does not list the conformance checks; got %d packages", len(deps))
	}
	if slices.Contains(deps, "testing") {
		t.Error("the jobq binary links the testing package; the CLI must reach the conformance checks through internal/confsuite, not package conformance")
	}
}
