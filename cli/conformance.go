package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) conformanceCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "conformance",
		Short: "Run the shared conformance suite against this live queue",
		Long: `Run jobq's conformance suite — the checks every backend passes — against the
backend of the given queue, on scratch queues named after it, and print a
pass/fail table. The queue's own tasks are not touched.`,
		Example: `  jobq postgres://localhost/test?queue=scratch conformance`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError("the conformance suite is not available in this build of jobq")
		},
	}
}
