package servicebus_test

import (
	"testing"

	"github.com/jobq/jobq/backends/servicebus"
	"github.com/jobq/jobq/conformance"
)

// TestConformance runs the shared suite against the emulator this package
// starts, or against the namespace in $JOBQ_TEST_SERVICEBUS_CONNECTION_STRING
// (the official emulator or Azure).
func TestConformance(t *testing.T) {
	if env.skip != "" {
		t.Skip(env.skip)
	}
	conformance.Run(t, conformance.Harness{
		Name: "servicebus",
		// Records are Azurite blobs, one request apiece: the export check
		// lists 2,000 records rather than 100,000.
		ExportRecords: 2000,
		NewQueueURL:   func(t testing.TB) string { return newQueueURL(t, resultsParam(t)) },
		Visibility:    lockDuration,
		PushRaw:       conformance.RawPusher(servicebus.DefaultOpener),
	})
}
