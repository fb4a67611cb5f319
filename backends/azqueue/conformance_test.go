package azqueue_test

import (
	"testing"

	"github.com/jobq/jobq/conformance"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Harness{
		Name:        "azqueue",
		NewQueueURL: newQueueURL,
		PushRaw:     pushRaw,
		// Azurite stores each record as a blob, one request apiece: the
		// export check lists 2,000 records rather than 100,000.
		ExportRecords: 2000,
		// Azurite's queue settles a few tasks a second on a busy machine:
		// PurgeRecordsByFilter runs 300 tasks rather than 2,000. (The
		// other bulk checks see the 32-task window bulk-actions emulated
		// declares.)
		BulkTasks: 300,
	})
}
