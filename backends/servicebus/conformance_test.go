package servicebus_test

import (
	"os"
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
		BulkTasks:     bulkTasks(),
	})
}

// bulkTasks is how many tasks the bulk checks use: the default (10,000)
// against a namespace; 600 against the emulator, which dead-letters about
// 20 messages a second and keeps each cancel record as a blob in Azurite
// (600 still takes three peek pages of 250).
func bulkTasks() int {
	if env.live || os.Getenv("JOBQ_TEST_BULK_FULL") != "" {
		return 0
	}
	return 600
}
