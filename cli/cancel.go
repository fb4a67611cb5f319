package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

func (a *app) cancelCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel ID... [flags]",
		Short: "Cancel tasks: remove queued ones, stop running ones",
		Long: `Cancel tasks by ID. For each, one line says what happened:

  removed         it was queued or delayed: it is removed and recorded as
                  cancelled; it will not run
  requested       it is running (or the backend cannot remove a queued task
                  by ID, or the ID is unknown): the worker that holds it, or
                  next receives it, stops it — SIGTERM, then SIGKILL after
                  its --kill-timeout, as at a time limit — and records it as
                  cancelled; it is not retried
  already-ended   it had ended (succeeded, dead-lettered, cancelled); its
                  record is unchanged

'-' reads more IDs from standard input, one per line. 'jobq QUEUE wait ID'
waits until a requested cancel has taken effect. Exit 0 when every ID was
handled, 1 when the backend failed, 2 when it keeps no result records (see
'jobq backends', results and cancel).`,
		Example: `  jobq sqlite://./work.db cancel 5d41402abc4b2a76b9719d911017c592
  jobq sqlite://./work.db cancel - < ids.txt
  jobq sqlite://./work.db cancel 5d41402abc4b2a76b9719d911017c592 --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ids, err := taskIDs(args, a.stdin)
			if err != nil {
				return err
			}
			return a.withQueue(ctx, func(q *jobq.Queue) error {
				if err := checkResults(q, "cancel"); err != nil {
					return err
				}
				res, err := q.Admin().Cancel(ctx, ids...)
				if err != nil {
					return resultFailure(err)
				}
				if asJSON {
					out := make([]cancelJSON, len(res))
					for i, r := range res {
						out[i] = cancelJSON{ID: r.ID, Outcome: string(r.Outcome), State: string(r.State)}
					}
					enc := json.NewEncoder(a.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(out)
				}
				for _, r := range res {
					fmt.Fprintln(a.stdout, cancelLine(r))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print a JSON array of {"id", "outcome", "state"}`)
	return cmd
}

// cancelJSON is one task as `cancel --json` prints it.
type cancelJSON struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	State   string `json:"state"`
}

// cancelLine says what Cancel did to one task.
func cancelLine(r jobq.CancelResult) string {
	switch r.Outcome {
	case jobq.CancelRemoved:
		return fmt.Sprintf("%s removed: it was queued; recorded as %s", r.ID, r.State)
	case jobq.CancelPending:
		return fmt.Sprintf("%s requested: the worker that runs it, or next receives it, stops it (jobq QUEUE wait %s waits for that)", r.ID, r.ID)
	case jobq.CancelTooLate:
		return fmt.Sprintf("%s already-ended: it %s; nothing to cancel", r.ID, endedAs(r.State))
	}
	return fmt.Sprintf("%s %s (%s)", r.ID, r.Outcome, r.State)
}

// endedAs words a final state for a sentence.
func endedAs(s driver.ResultState) string {
	switch s {
	case driver.ResultSucceeded:
		return "succeeded"
	case driver.ResultDeadLettered:
		return "was dead-lettered"
	case driver.ResultCancelled:
		return "was cancelled"
	}
	return "ended as " + string(s)
}
