package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

func (a *app) cancelCommand() *cobra.Command {
	ff := filterFlags{verb: "cancel", states: []string{"queued"}}
	asJSON := &ff.asJSON
	cmd := &cobra.Command{
		Use:   "cancel (ID... | --kind K | --key K | --since T | --until T | --all) [flags]",
		Short: "Cancel tasks: remove queued ones, stop running ones",
		Long: `Cancel tasks by ID, or every queued task a filter matches. By ID, one line
per task says what happened:

  removed         it was queued or delayed: it is removed and recorded as
                  cancelled; it will not run
  requested       it is running: the worker that holds it stops it —
                  SIGTERM, then SIGKILL after its --kill-timeout, as at a
                  time limit — and records it as cancelled; it is not
                  retried. Where the backend cannot remove a queued task
                  by ID (azqueue, servicebus), every task not ended is
                  requested, an unknown ID too: the cancel is recorded in
                  case a task with that ID arrives, and the worker that
                  next receives it drops it unrun
  already-ended   it had ended (succeeded, dead-lettered, cancelled); its
                  record is unchanged
  not-found       an error, where the backend can look IDs up (postgres,
                  sqlite, redis, mem): no task with this ID is queued or
                  running here, nor ended within the retention (a mistyped
                  ID, another queue, a task not pushed yet); nothing was
                  recorded, so a task pushed with this ID later runs

'-' reads more IDs from standard input, one per line. 'jobq QUEUE wait ID'
waits until a requested cancel has taken effect. Exit 0 when every ID was
handled, 1 when an ID was not found (after every line) or the backend
failed, 2 when it keeps no result records (see
'jobq backends', results and cancel).

By filter (no IDs): every queued (ready or delayed, not running) task that
matches every filter given is cancelled as above, a page (--batch) at a
time, each page's matches in one batch. Running tasks are not matched:
cancel them by ID. A cancel with no filter is refused unless --all says so.
It first counts the matches (a dry run) and asks before it changes
anything, unless --yes; --dry-run only counts.`,
		Example: `  jobq sqlite://./work.db cancel 5d41402abc4b2a76b9719d911017c592
  jobq sqlite://./work.db cancel - < ids.txt
  jobq sqlite://./work.db cancel 5d41402abc4b2a76b9719d911017c592 --json
  jobq sqlite://./work.db cancel --kind thumbnail --dry-run
  jobq sqlite://./work.db cancel --key tenant-42 --since 1h --yes`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			switch bulk := ff.set(cmd.Flags()); {
			case bulk && len(args) > 0:
				return usageError("give task IDs or a filter (--kind, --key, --since, --until, --all), not both")
			case bulk:
				return a.runBulk(cmd, &ff, bulkVerb{verb: "cancel", past: "cancelled", noun: "queued tasks", needAll: true,
					run: func(ad *jobq.Admin) func(context.Context, jobq.Filter) (jobq.BulkResult, error) {
						return func(ctx context.Context, f jobq.Filter) (jobq.BulkResult, error) { return ad.CancelWhere(ctx, f) }
					}})
			case len(args) == 0:
				return usageError("give task IDs to cancel ('-' reads them from standard input), or a filter (--kind, --key, --since, --until, or --all for every queued task)")
			}
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
				var missing []string
				for _, r := range res {
					if r.Outcome == jobq.CancelNotFound {
						missing = append(missing, r.ID)
					}
				}
				if *asJSON {
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
						fmt.Fprintln(a.stdout, a.cancelLine(r))
					}
				}
				if len(missing) > 0 {
					why := "check the IDs and the queue URL"
					if checkKeepsRecords(ctx, q, "cancel") != nil {
						// Ended tasks keep no record to say they ended.
						why = "under the results policy none an ended or dead-lettered task reads so too (see the dead letters with: " + a.commandHint("dlq list") + "); else check the IDs and the queue URL"
					}
					return failure(fmt.Errorf("%d of %s %s not found: no task with such an ID is queued or running here; nothing was recorded for them: %s (%s)", len(missing), countOf(int64(len(res)), "task ID"), wasWere(len(missing)), why, strings.Join(missing[:min(len(missing), maxListed)], " ")))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(asJSON, "json", false, `by ID: print a JSON array of {"id", "outcome", "state"} (no state for not-found); by filter: {"scanned", "matched", "done", "pending", "dry_run", "partial"}`)
	ff.add(cmd.Flags(), "queued (the default and only one)")
	cmd.Flags().BoolVar(&ff.all, "all", false, "cancel every queued task (a filter with no other criterion)")
	// How a task ended filters dead letters, which cancel does not take.
	_ = cmd.Flags().MarkHidden("exit-code")
	_ = cmd.Flags().MarkHidden("error")
	return cmd
}

// cancelJSON is one task as `cancel --json` prints it.
type cancelJSON struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	State   string `json:"state,omitempty"`
}

// cancelLine says what Cancel did to one task.
func (a *app) cancelLine(r jobq.CancelResult) string {
	switch r.Outcome {
	case jobq.CancelNotFound:
		return fmt.Sprintf("%s not-found: no task with this ID is queued or running here; nothing was recorded", r.ID)
	case jobq.CancelRemoved:
		return fmt.Sprintf("%s removed before it ran (it was queued, delayed or held); recorded as %s", r.ID, r.State)
	case jobq.CancelPending:
		return fmt.Sprintf("%s requested: the worker that runs it stops it, or the one that next receives it drops it (%s waits for that)", r.ID, a.commandHint("wait "+r.ID))
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
