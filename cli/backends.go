package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/catalog"
)

func (a *app) backendsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "backends",
		Short: "List the queue URL schemes this build supports, with what each can do",
		Long: `Print every registered URL scheme with its capability matrix: for each
feature, whether the backend provides it natively, emulates it (with a
one-time warning when used), or does not support it; then the limits, and
what happens instead for each feature that is not native. No queue is
needed.`,
		Example: `  jobq backends`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(jobq.DefaultURLMux().Schemes()) == 0 {
				fmt.Fprintln(a.stdout, "no backends are registered in this build")
				return nil
			}
			if err := catalog.WriteCapabilityMatrix(a.stdout, jobq.DefaultURLMux()); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "\nWhat happens instead, where a feature is not native:")
			return catalog.WriteFallbacks(a.stdout, jobq.DefaultURLMux())
		},
	}
}
