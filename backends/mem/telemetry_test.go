package mem_test

import (
	"crypto/rand"
	"testing"

	"github.com/jobq/jobq/tools/testkit/otelcheck"
)

// TestTelemetry checks the spans and metric values of a small run.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	otelcheck.Run(t, "mem://"+rand.Text(), 0)
}
