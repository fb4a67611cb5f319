package redis

import (
	"testing"

	"github.com/jobq/jobq/tools/testkit/otelcheck"
)

// TestTelemetry checks the spans (the process span linked to the push) and
// the metric values of a small run, through the message hash's h field.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	otelcheck.Run(t, newQueueURL(t, ""), 0)
}

// TestTelemetryCancelledTask: a task cancelled while it runs counts as
// neither completed nor failed.
func TestTelemetryCancelledTask(t *testing.T) {
	t.Parallel()
	otelcheck.RunCancelled(t, newQueueURL(t, ""))
}
