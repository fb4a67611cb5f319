package servicebus_test

import (
	"testing"

	"github.com/jobq/jobq/tools/testkit/killtest"
)

// TestKilledWorkerReruns measures what a SIGKILL costs on Service Bus
// (tools/testkit/killtest): nothing may be lost. Each completion is its own
// disposition (CompleteBatch 1), so finished tasks wait for their
// acknowledgement only briefly. The workers use the parent's emulator.
func TestKilledWorkerReruns(t *testing.T) {
	if killtest.Child(t) {
		return
	}
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	raw := newQueueURL(t)
	q, _ := open(t, raw)
	killtest.Run(t, q, killtest.Config{
		Test: "TestKilledWorkerReruns", URL: raw,
		Tasks: 600, Kills: 3, PerRun: 100, Concurrency: 8,
		Env: []string{"JOBQ_TEST_SERVICEBUS_CONNECTION_STRING=" + env.connStr},
	})
}
