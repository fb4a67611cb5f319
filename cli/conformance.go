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
	cmd := &cobra.Command{
		Use:   "conformance [--visibility D] [--serial] [--details]",
		Short: "Run the shared conformance suite against this live queue's backend",
		Long: `Run jobq's conformance suite — the checks every backend passes in its own
tests — against the backend of the given queue, and print a pass/fail table.

Each check runs on its own scratch queue named after the given one
(NAME-conf-RUN-N), with the same backend, account and settings; the scratch
queues are cleared afterwards but not deleted. The given queue itself is not
touched. The poison-message check needs raw access to the backend and is
skipped here; the backend's own tests run it.

Exit status 1 when a check failed.`,
		Example: `  jobq 'postgres://localhost/test?queue=scratch' conformance
  jobq sb://mynamespace/scratch conformance --visibility 30s --serial`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := a.queueURL()
			if err != nil {
				return err
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
	return cmd
}
