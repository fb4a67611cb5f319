package servicebus_test

import (
	"testing"

	"github.com/jobq/jobq/tools/testkit/otelcheck"
)

// TestTelemetry checks the spans (the process span linked to the push
// through the traceparent application property) and the metric values of
// a small run on the emulator.
func TestTelemetry(t *testing.T) {
	otelcheck.Run(t, newQueueURL(t), lockDuration)
}
