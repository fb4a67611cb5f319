package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/jobq/jobq/tools/testkit/otelcheck"
)

// TestTelemetry checks the spans (the process span linked to the push) and
// the metric values of a small run, through the trace_parent column.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	otelcheck.Run(t, "sqlite://"+filepath.Join(t.TempDir(), "otel.db")+"?queue=otel", 0)
}

// TestTelemetryCancelledTask: a task cancelled while it runs counts as
// neither completed nor failed.
func TestTelemetryCancelledTask(t *testing.T) {
	t.Parallel()
	otelcheck.RunCancelled(t, "sqlite://"+filepath.Join(t.TempDir(), "cancel.db")+"?queue=otel")
}
