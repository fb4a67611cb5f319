package azqueue_test

import (
	"testing"
	"time"

	"github.com/jobq/jobq/tools/testkit/killtest"
)

// TestKilledWorkerReruns measures what a SIGKILL costs on Storage Queue
// (tools/testkit/killtest): nothing may be lost. Finished tasks wait for their
// deletes only briefly (the worker bounds that backlog by count and time),
// so a kill re-runs few: by construction at most the tasks running (the
// slots) and the finished ones whose deletes were pending (maxUnsettled
// for a 32-message receive batch).
func TestKilledWorkerReruns(t *testing.T) {
	if killtest.Child(t) {
		return
	}
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	t.Parallel()
	const kills, concurrency = 3, 8
	q, raw := openQueue(t)
	killtest.Run(t, q, killtest.Config{
		Test: "TestKilledWorkerReruns", URL: raw,
		Tasks: 800, Kills: kills, PerRun: 150,
		Concurrency: concurrency, Visibility: 5 * time.Second,
		MaxReruns: kills * (concurrency + 32),
	})
}
