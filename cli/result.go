package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
)

func (a *app) resultCommand() *cobra.Command {
	var asJSON, showSecrets bool
	cmd := &cobra.Command{
		Use:   "result ID [--json]",
		Short: "Print the result record of a task that ended",
		Long: `Print what the queue kept about a task that ended: its final state
(succeeded, dead-lettered, cancelled; or cancel-requested while a cancel is
pending, printed with exit 1: the task has not ended), the exit code or the error, the tail of its output, a Go
handler's return value, when and where its last attempt ran, how often it
was delivered, and its attempt history.

Records are kept for the queue's retention (7 days unless 'jobq QUEUE
policy set retention D' says otherwise). A task that has not ended, or
whose record expired, has none: exit 1. On a backend that keeps no
records (see 'jobq backends', results) result is a usage error (exit 2)
that says so.

The credentials in the error, the output tail and the attempt details
(postgres://u:PASSWORD@db) print as xxxxx unless --show-secrets. --json
prints one object, as stored; its members are listed in docs/results.md.`,
		Example: `  jobq sqlite://./work.db result 5d41402abc4b2a76b9719d911017c592
  jobq sqlite://./work.db result 5d41402abc4b2a76b9719d911017c592 --json | jq .value`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			if err := checkTaskID(id); err != nil {
				return asUsage(err)
			}
			return a.readQueue(ctx, func(q *jobq.Queue) error {
				if err := checkResults(q, "result"); err != nil {
					return err
				}
				r, err := q.Result(ctx, id)
				if err != nil {
					if errcode.Of(err) == errcode.NotFound {
						if note := a.heldNote(ctx, q, id); note != "" {
							return failure(fmt.Errorf("task %s has no result record: it has not ended; %s", id, note))
						}
						return failure(fmt.Errorf("task %s has no result record: it has not ended yet, its ID is unknown, or its record expired (records are kept for the queue's retention, shown by: %s); to find a queued or dead-lettered task: %s", id, a.commandHint("policy list"), a.commandHint("show "+id)))
					}
					return resultFailure(err)
				}
				if asJSON {
					enc := json.NewEncoder(a.stdout)
					enc.SetIndent("", "  ")
					err = enc.Encode(toResultJSON(r))
				} else {
					err = printResult(a.stdout, r, showSecrets)
				}
				if err == nil && !r.State.Final() {
					err = failure(fmt.Errorf("task %s has not ended: a cancel is pending (%s); it ends when the worker that holds it, or next receives a task with this ID, stops it; to wait for that: %s", id, r.State, a.commandHint("wait --timeout 10m "+id)))
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the record as one JSON object (schema in docs/results.md)")
	showSecretsFlag(cmd.Flags(), &showSecrets)
	return cmd
}

// resultFailure maps an error of Result, Wait or Cancel to an exit code:
// invalid input is a usage error, the rest a failure, with a pointer to
// the capability table when the backend keeps no results.
func resultFailure(err error) error {
	switch errcode.Of(err) {
	case errcode.InvalidArgument:
		return asUsage(err)
	case errcode.Unimplemented:
		return failure(fmt.Errorf("%w; see docs/results.md and 'jobq backends' (results, cancel) for what each backend keeps", err))
	}
	return failure(err)
}

// resultJSON is a result record as `result --json`, `wait --json` and
// `push --wait --json` print it. Every member is always present; the
// schema is documented in docs/results.md.
type resultJSON struct {
	ID            string          `json:"id"`
	State         string          `json:"state"`
	ExitCode      *int            `json:"exit_code"`
	Error         string          `json:"error"`
	Output        string          `json:"output"`
	Value         json.RawMessage `json:"value"`
	Started       *time.Time      `json:"started"`
	Finished      *time.Time      `json:"finished"`
	Worker        string          `json:"worker"`
	Host          string          `json:"host"`
	Env           string          `json:"env"`
	DeliveryCount int             `json:"delivery_count"`
	Attempts      []attemptJSON   `json:"attempts"`
	ExpiresAt     *time.Time      `json:"expires_at"`
}

func toResultJSON(r *jobq.Result) resultJSON {
	out := resultJSON{ID: r.ID, State: string(r.State), ExitCode: r.ExitCode, Error: r.Error, Output: r.Output,
		Started: timePtr(r.Started), Finished: timePtr(r.Finished), Worker: r.Worker, Host: r.Host, Env: r.Env,
		DeliveryCount: r.DeliveryCount, Attempts: attemptsJSON(r.Attempts), ExpiresAt: timePtr(r.ExpiresAt)}
	if len(r.Value) > 0 && json.Valid(r.Value) {
		out.Value = r.Value
	}
	return out
}

// printResult writes a record for a person: the fields, the output tail,
// then the attempt history, with credentials in the text redacted unless
// show.
func printResult(w io.Writer, r *jobq.Result, show bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("task", r.ID)
	row("state", string(r.State))
	if r.ExitCode != nil {
		row("exit code", strconv.Itoa(*r.ExitCode))
	}
	row("error", oneLine(shownText(r.Error, show)))
	if len(r.Value) > 0 {
		row("value", string(r.Value))
	}
	if !r.Started.IsZero() {
		row("started", timeOrDash(r.Started))
	}
	if !r.Finished.IsZero() {
		row("finished", timeOrDash(r.Finished))
		if !r.Started.IsZero() && !r.Finished.Before(r.Started) {
			row("ran for", r.Finished.Sub(r.Started).Round(time.Millisecond).String())
		}
	}
	row("worker", r.Worker)
	row("host", r.Host)
	row("environment", r.Env)
	if r.DeliveryCount > 0 { // 0: the record does not know (a queued task cancelled)
		row("deliveries", strconv.Itoa(r.DeliveryCount))
	}
	if !r.ExpiresAt.IsZero() {
		row("kept until", timeOrDash(r.ExpiresAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Output != "" {
		fmt.Fprintln(w, "\noutput (tail):")
		out := shownText(r.Output, show)
		if !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		fmt.Fprint(w, out)
	}
	fmt.Fprintln(w)
	return printAttempts(w, r.Attempts, show)
}

// oneLine joins the lines of s with spaces, for a table cell or an
// outcome line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
