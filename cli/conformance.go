package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq/internal/confsuite"
	"github.com/jobq/jobq/internal/hooks"
)

func (a *app) conformanceCommand() *cobra.Command {
	var visibility time.Duration
	var serial, details bool
	var records, bulkTasks int
	cmd := &cobra.Command{
		Use:   "conformance [--visibility D] [--serial] [--details] [--records N] [--bulk-tasks N]",
		Short: "Run the shared conformance suite against this live queue's backend",
		Long: `Run jobq's conformance suite — the checks every backend passes in its own
tests — against the backend of the given queue, and print a pass/fail table.

Each check runs on its own scratch queue named after the given one
(NAME-conf-RUN-N), with the same backend, account and settings; the scratch
queues are cleared afterwards but not deleted. The given queue itself is not
touched. The poison-message check needs raw access to the backend and is
skipped here; the backend's own tests run it.

The export check stores --records result records and the bulk checks push
--bulk-tasks tasks; on a billed service (Azure) lower them to keep the run
short and cheap.

Exit status 1 when a check failed.`,
		Example: `  jobq 'postgres://localhost/test?queue=scratch' conformance
  jobq sb://mynamespace/scratch conformance --visibility 30s --serial`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := a.queueURL()
			if err != nil {
				return err
			}
			if records < 100 || bulkTasks < 100 {
				return usageError("--records %d, --bulk-tasks %d: each must be at least 100 for the checks to mean something", records, bulkTasks)
			}
			// Opening once checks the scheme and the connection before a
			// few minutes of checks.
			q, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			q.Close()
			newURL, err := confsuite.ScratchQueues(raw)
			if err != nil {
				return asUsage(err)
			}
			fmt.Fprintf(a.stderr, "jobq: running the conformance suite on scratch queues next to %s; this can take a few minutes\n", hooks.URL(q))
			rs := confsuite.RunLive(cmd.Context(), confsuite.Harness{
				Name:            hooks.Scheme(q),
				Visibility:      visibility,
				Serial:          serial,
				ExportRecords:   records,
				BulkTasks:       bulkTasks,
				NewLiveQueueURL: newURL,
			})
			if err := confsuite.WriteTable(a.stdout, rs, details); err != nil {
				return err
			}
			for _, r := range rs {
				if r.Status == confsuite.Failed {
					return failure(fmt.Errorf("conformance check %s failed (run with --details for every message)", r.Name))
				}
			}
			return nil
		},
	}
	visibility = time.Second
	cmd.Flags().Var(durationFlag(&visibility), "visibility", "the short lease the expiry checks use; set it to the queue's lock duration on Service Bus")
	cmd.Flags().BoolVar(&serial, "serial", false, "run the checks one at a time (for engines that cannot take the load)")
	cmd.Flags().BoolVar(&details, "details", false, "print every check's messages")
	cmd.Flags().IntVar(&records, "records", 100_000, "result records the export check stores (at least 100)")
	cmd.Flags().IntVar(&bulkTasks, "bulk-tasks", 10_000, "tasks the bulk-action checks push (at least 100)")
	return cmd
}
