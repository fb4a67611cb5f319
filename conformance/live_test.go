package conformance_test

import (
	"bytes"
	"strings"
	"testing"

	_ "github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/conformance"
)

// TestRunLivePublic: the public RunLive, LiveHarness and WriteTable reach
// the checks (the runner itself is tested in internal/confsuite).
func TestRunLivePublic(t *testing.T) {
	t.Parallel()
	h, err := conformance.LiveHarness("mem://public-live")
	if err != nil {
		t.Fatal(err)
	}
	h.Serial = false
	rs := conformance.RunLive(t.Context(), h)
	if len(rs) != len(conformance.Names()) {
		t.Fatalf("RunLive returned %d results for %d checks", len(rs), len(conformance.Names()))
	}
	for _, r := range rs {
		if r.Status == conformance.Failed {
			t.Errorf("%s failed: %s", r.Name, strings.Join(r.Messages, "; "))
		}
	}
	var buf bytes.Buffer
	if err := conformance.WriteTable(&buf, rs, false); err != nil {
		t.Fatal(err)
	}
	if !conformance.AllPassed(rs) || !strings.Contains(buf.String(), "Poison") {
		t.Errorf("AllPassed %v; table:\n%s", conformance.AllPassed(rs), buf.String())
	}
}
