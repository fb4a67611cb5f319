package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq/internal/hooks"
	"github.com/spf13/cobra"
)

func (a *app) dlqCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, requeue or purge dead-lettered tasks",
		Long: `Dead letters are tasks that failed past their retry budget, that a worker
dead-lettered, or that could not be decoded. Each keeps the reason and the
tail of the task's output.`,
		Example: `  jobq sqlite://./work.db dlq list
  jobq sqlite://./work.db dlq requeue --all
  jobq sqlite://./work.db dlq purge MESSAGE_ID`,
	}
	cmd.AddCommand(a.dlqListCommand(), a.dlqMoveCommand("requeue"), a.dlqMoveCommand("purge"))
	return cmd
}

func (a *app) dlqListCommand() *cobra.Command {
	var n int
	var asJSON, detail, showSecrets bool
	cmd := &cobra.Command{
		Use:   "list [-n N] [--json] [--detail]",
		Short: "List dead letters, oldest first",
		Long: `List dead letters, oldest first: message ID, deliveries, attempt history,
when and why each was dead-lettered, and its command. The values of task
environment variables whose names look secret (API_TOKEN, DB_PASSWORD, ...)
print as **** unless --show-secrets, in --json's body too; the credentials
in commands, reasons and output tails (postgres://u:PASSWORD@db) print as
xxxxx in the table and --detail unless --show-secrets.`,
		Example: `  jobq sqlite://./work.db dlq list
  jobq sqlite://./work.db dlq list --detail
  jobq sqlite://./work.db dlq list --json -n 1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n < 1 {
				return usageError("-n is %d; ask for at least 1", n)
			}
			q, err := a.openReadOnly(cmd.Context())
			if err != nil {
				return err
			}
			defer q.Close()
			dead, err := q.Admin().DeadLetters(cmd.Context(), n)
			if err != nil {
				return failure(err)
			}
			if asJSON {
				type out struct {
					MessageID     string          `json:"message_id"`
					TaskID        string          `json:"task_id,omitempty"`
					Reason        string          `json:"reason"`
					Detail        string          `json:"detail,omitempty"`
					DeliveryCount int             `json:"delivery_count"`
					DeadAt        *time.Time      `json:"dead_at,omitempty"`
					Body          json.RawMessage `json:"body"`
					Attempts      []attemptJSON   `json:"attempts"`
				}
				list := make([]out, 0, len(dead))
				for _, d := range dead {
					o := out{MessageID: d.MessageID, Reason: d.Reason, Detail: d.Detail, DeliveryCount: d.DeliveryCount, DeadAt: timePtr(d.DeadAt),
						Body: displayBody(d.Body, showSecrets), Attempts: attemptsJSON(d.Attempts(q))}
					if d.Task != nil {
						o.TaskID = d.Task.ID
					}
					list = append(list, o)
				}
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			if len(dead) == 0 {
				fmt.Fprintln(a.stdout, "(no dead letters)")
				return nil
			}
			t := newTable(a.stdout, "MESSAGE ID", "DELIVERIES", "ATTEMPTS", "DEAD AT", "REASON", "TASK")
			for _, d := range dead {
				what := "undecodable"
				if d.Task != nil {
					what = taskText(d.Task, showSecrets)
				}
				t.row(d.MessageID, d.DeliveryCount, attemptSummary(d.Attempts(q)), timeOrDash(d.DeadAt),
					truncate(shownText(d.Reason, showSecrets), 60), truncate(what, 60))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if detail {
				for _, d := range dead {
					if d.Detail == "" {
						continue
					}
					fmt.Fprintf(a.stdout, "\n--- %s: %s\n%s\n", d.MessageID, shownText(d.Reason, showSecrets),
						shownText(strings.TrimRight(d.Detail, "\n"), showSecrets))
					if as := d.Attempts(q); len(as) > 0 {
						_ = printAttempts(a.stdout, as, showSecrets)
					}
				}
			}
			return nil
		},
	}
	countFlag(cmd.Flags(), &n, "num", "n", 100, countRange, "how many dead letters to list")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON, with the reason, the detail and the raw message")
	cmd.Flags().BoolVar(&detail, "detail", false, "also print each dead letter's detail (the tail of the task's output)")
	showSecretsFlag(cmd.Flags(), &showSecrets)
	return cmd
}

// dlqMoveCommand builds requeue and purge, which take the same arguments.
func (a *app) dlqMoveCommand(verb string) *cobra.Command {
	var all, yes bool
	short := map[string]string{
		"requeue": "Move dead letters back to the queue",
		"purge":   "Delete dead letters",
	}[verb]
	cmd := &cobra.Command{
		Use:   verb + " (MESSAGE_ID... | --all)",
		Short: short,
		Long: short + `, by message ID (from 'dlq list') or all of them with --all.` + map[string]string{
			"requeue": " Requeued tasks keep their remaining retry budget (on Service Bus, whose requeued copy is a new message, their whole budget).",
			"purge":   " Asks for confirmation with --all unless --yes.",
		}[verb],
		Example: fmt.Sprintf("  jobq sqlite://./work.db dlq %s MESSAGE_ID\n  jobq sqlite://./work.db dlq %s --all", verb, verb),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if all == (len(ids) > 0) {
				return usageError("give message IDs (list them with: %s) or --all, not both and not neither", a.commandHint("dlq list"))
			}
			ctx := cmd.Context()
			q, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer q.Close()
			dl := q.Admin()
			var n int64
			if verb == "requeue" {
				n, err = dl.RequeueDeadLetters(ctx, ids...)
			} else {
				if all && !yes {
					if err := a.confirm(fmt.Sprintf("Delete every dead letter of %s?", hooks.URL(q))); err != nil {
						return err
					}
				}
				n, err = dl.PurgeDeadLetters(ctx, ids...)
			}
			if err != nil {
				return failure(err)
			}
			past := map[string]string{"requeue": "requeued", "purge": "purged"}[verb]
			fmt.Fprintf(a.stdout, "%s %s\n", past, countOf(n, "dead letter"))
			if distinct := int64(len(slices.Compact(slices.Sorted(slices.Values(ids))))); len(ids) > 0 && n < distinct {
				// As cancel does for an ID it does not find: a typo must not
				// pass for done in a script.
				missing := distinct - n
				they, notDead := "they are", "dead letters"
				if missing == 1 {
					they, notDead = "it is", "a dead letter"
				}
				why := they + " not " + notDead + " (list them with: " + a.commandHint("dlq list") + ")"
				return failure(fmt.Errorf("%d of the %s given %s not %s: %s", missing, countOf(distinct, "ID"), wasWere(int(missing)), past, why))
			}
			if all && verb == "requeue" {
				// Tasks dead-lettered while the requeue ran stay: say so,
				// rather than let the count pass for an empty store.
				if st, err := dl.Stats(ctx); err == nil && st.Known.Dead && st.Dead > 0 {
					why := "they were dead-lettered meanwhile"
					if st.Dead == 1 {
						why = "it was dead-lettered meanwhile"
					}
					fmt.Fprintf(a.stderr, "jobq: %s not requeued: %s; see them with: %s\n",
						countOf(st.Dead, "dead letter"), why, a.commandHint("dlq list"))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every dead letter")
	if verb == "purge" {
		cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	}
	return cmd
}
