package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
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
                  by ID, so cannot tell an unknown ID either): the worker that holds it, or
                  next receives it, stops it — SIGTERM, then SIGKILL after
                  its --kill-timeout, as at a time limit — and records it as
                  cancelled; it is not retried
  already-ended   it had ended (succeeded, dead-lettered, cancelled); its
                  record is unchanged
  not-found       no such task is queued or running, and none has a
                  record (a mistyped ID, or a task not pushed yet): the
                  cancel stays pending for the queue's retention, and a
                  task pushed with this ID meanwhile is dropped unrun by
                  the worker that receives it

'-' reads more IDs from standard input, one per line. 'jobq QUEUE wait ID'
waits until a requested cancel has taken effect. Exit 0 when every ID was
handled, 1 when an ID was not found (after every line) or the backend failed, 2 when it keeps no result records (see
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
				res, err := q.Cancel(ctx, ids...)
				if err != nil {
					return resultFailure(err)
				}
				var missing []string
				for _, r := range res {
					if r.Outcome == jobq.CancelNotFound {
						missing = append(missing, r.ID)
					}
				}
				if asJSON {
					out := make([]cancelJSON, len(res))
					for i, r := range res {
						out[i] = cancelJSON{ID: r.ID, Outcome: string(r.Outcome), State: string(r.State)}
					}
					enc := json.NewEncoder(a.stdout)
					enc.SetIndent("", "  ")
					if err := enc.Encode(out); err != nil {
						return err
					}
				} else {
					for _, r := range res {
						var until time.Time
						if r.Outcome == jobq.CancelNotFound {
							if rec, err := q.Result(ctx, r.ID); err == nil {
								until = rec.ExpiresAt
							}
						}
						fmt.Fprintln(a.stdout, a.cancelLine(r, until))
					}
				}
				if len(missing) > 0 {
					return failure(fmt.Errorf("%d of %d task IDs were not found (no such task is queued or running): check them; their cancels stay pending, so a task pushed with one of them is dropped unrun", len(missing), len(res)))
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

// cancelLine says what Cancel did to one task; until is when a pending
// cancel's record expires (zero when unknown).
func (a *app) cancelLine(r jobq.CancelResult, until time.Time) string {
	switch r.Outcome {
	case jobq.CancelNotFound:
		within := "within the queue's retention"
		if !until.IsZero() {
			within = "before " + until.Local().Format(time.DateTime)
		}
		return fmt.Sprintf("%s not-found: no such task is queued or running; a task with this ID pushed %s will be cancelled when a worker receives it", r.ID, within)
	case jobq.CancelRemoved:
		return fmt.Sprintf("%s removed: it was queued; recorded as %s", r.ID, r.State)
	case jobq.CancelPending:
		return fmt.Sprintf("%s requested: the worker that runs it, or next receives it, stops it (%s waits for that)", r.ID, a.commandHint("wait "+r.ID))
	case jobq.CancelTooLate:
		return fmt.Sprintf("%s already-ended: it %s; nothing to cancel", r.ID, endedAs(r.State))
	}
	return fmt.Sprintf("%s %s (%s)", r.ID, r.Outcome, r.State)
}

// endedAs words a final state for a sentence.
func endedAs(s jobq.ResultState) string {
	switch s {
	case jobq.Succeeded:
		return "succeeded"
	case jobq.DeadLettered:
		return "was dead-lettered"
	case jobq.Cancelled:
		return "was cancelled"
	}
	return "ended as " + string(s)
}
