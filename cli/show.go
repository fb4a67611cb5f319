package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/envmask"
)

// showScan is how many queued messages and dead letters `show` looks
// through for the ID.
const showScan = 10000

func (a *app) showCommand() *cobra.Command {
	var asJSON, showSecrets bool
	cmd := &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one task, queued or dead-lettered, with its attempt history",
		Long: `Find a task by its task ID or message ID among the queued tasks (as peek
sees them) and the dead letters, and print it with its attempt history:
for each attempt the worker, host, start, end and outcome — failure (with
the exit code), gate miss, requeued (the worker was stopped), or lease
expired (the worker died or hung mid-task; inferred, so who ran it is
unknown). Histories are kept on backends that update messages in place
(see 'jobq backends', in-place-update), for the last 10 attempts.

The values of the task's environment variables whose names look secret
(API_TOKEN, DB_PASSWORD, ...) print as **** unless --show-secrets; so do,
as xxxxx and in the text only, the credentials in its command, reason and
attempt details (postgres://u:PASSWORD@db).

"retries left" is the task's num_retries where a failed task is written
back with one retry fewer (in-place-update native); elsewhere (Service
Bus) it is the range its past deliveries allow, and none for a dead letter.

show looks through the first 10000 queued tasks and dead letters.`,
		Example: `  jobq sqlite://./work.db show 5d41402abc4b2a76b9719d911017c592
  jobq sqlite://./work.db show 5d41402abc4b2a76b9719d911017c592 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			if id == "" {
				return usageError("an empty task or message ID; give one as push --print-ids or dlq list prints it")
			}
			q, err := a.openReadOnly(ctx)
			if err != nil {
				return err
			}
			defer q.Close()
			var found *shownTask
			msgs, err := q.Admin().Peek(ctx, showScan)
			if err != nil && errcode.Of(err) != errcode.Unimplemented {
				return failure(err)
			}
			for _, m := range msgs {
				if m.MessageID == id || (m.Task != nil && m.Task.ID == id) {
					found = &shownTask{MessageID: m.MessageID, State: peekState(m), Deliveries: m.DeliveryCount,
						EnqueuedAt: timePtr(m.EnqueuedAt), task: m.Task, attempts: m.Attempts(q)}
					found.retriesLeft = retriesLeftText(q, m.Task, false, m.DeliveryCount, m.InFlight)
					break
				}
			}
			if found == nil {
				dead, err := q.Admin().DeadLetters(ctx, showScan)
				if err != nil && errcode.Of(err) != errcode.Unimplemented {
					return failure(err)
				}
				for _, d := range dead {
					if d.MessageID == id || (d.Task != nil && d.Task.ID == id) {
						found = &shownTask{MessageID: d.MessageID, State: "dead-lettered", Deliveries: d.DeliveryCount,
							Reason: d.Reason, DeadAt: timePtr(d.DeadAt), task: d.Task, attempts: d.Attempts(q)}
						found.retriesLeft = retriesLeftText(q, d.Task, true, d.DeliveryCount, false)
						break
					}
				}
			}
			if found == nil {
				if note := a.heldNote(ctx, q, id); note != "" {
					return failure(errors.New(note))
				}
				return failure(fmt.Errorf("no task or message %q among the first %d queued tasks and dead letters; a task that ended leaves a result record instead: %s", id, showScan, a.commandHint("result "+id)))
			}
			found.fill(showSecrets)
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(found)
			}
			return found.print(a.stdout)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	showSecretsFlag(cmd.Flags(), &showSecrets)
	return cmd
}

// shownTask is what `show` prints.
type shownTask struct {
	TaskID         string        `json:"task_id,omitempty"`
	MessageID      string        `json:"message_id"`
	State          string        `json:"state"`
	Deliveries     int           `json:"delivery_count"`
	EnqueuedAt     *time.Time    `json:"enqueued_at,omitempty"`
	DeadAt         *time.Time    `json:"dead_at,omitempty"`
	Reason         string        `json:"reason,omitempty"`
	Command        string        `json:"command,omitempty"`
	Env            envObject     `json:"env,omitempty"`
	Cwd            string        `json:"cwd,omitempty"`
	Payload        any           `json:"payload,omitempty"`
	NumRetries     int           `json:"num_retries"`
	Priority       int           `json:"priority,omitempty"`
	ConcurrencyKey string        `json:"concurrency_key,omitempty"`
	RateLimitKey   string        `json:"rate_limit_key,omitempty"`
	Attempts       []attemptJSON `json:"attempts"`

	task        *jobq.Task
	attempts    []jobq.Attempt
	retriesLeft string // the "retries left" row (retriesLeftText)
	// show prints credentials in the text (--show-secrets).
	show bool
}

// fill sets the printed fields from the task, with secret environment
// values masked unless showSecrets.
func (s *shownTask) fill(showSecrets bool) {
	s.show = showSecrets
	if t := s.task; t != nil {
		s.TaskID, s.Command, s.Cwd, s.NumRetries, s.Priority = t.ID, t.Command, t.Cwd, t.NumRetries, t.Priority
		s.ConcurrencyKey, s.RateLimitKey = t.ConcurrencyKey, t.RateLimitKey
		s.Env = t.Env
		if !showSecrets {
			s.Env = envmask.Env(t.Env)
		}
		if len(t.Payload) > 0 {
			s.Payload = displayPayload(t.Payload, showSecrets)
		}
	}
	s.Attempts = attemptsJSON(s.attempts)
}

func (s *shownTask) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("task", s.TaskID)
	row("message", s.MessageID)
	row("state", s.State)
	row("deliveries", strconv.Itoa(s.Deliveries))
	if s.EnqueuedAt != nil {
		row("enqueued", timeOrDash(*s.EnqueuedAt))
	}
	if s.DeadAt != nil {
		row("dead-lettered", timeOrDash(*s.DeadAt))
	}
	row("reason", shownText(s.Reason, s.show))
	row("command", multiline(shownText(s.Command, s.show)))
	for i, e := range s.Env {
		k := ""
		if i == 0 {
			k = "env"
		}
		e.Value = shownText(e.Value, s.show)
		fmt.Fprintf(tw, "%s\t%s\n", k, envText(e))
	}
	row("cwd", s.Cwd)
	if s.Payload != nil {
		row("payload", shownText(string(s.Payload.(json.RawMessage)), s.show))
	}
	row("retries left", s.retriesLeft)
	row("concurrency key", s.ConcurrencyKey)
	row("rate-limit key", s.RateLimitKey)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printAttempts(w, s.attempts, s.show)
}

// retriesLeftText is what `show` prints as a task's retries left. Where
// the backend rewrites a failed task with one retry fewer (in-place-update
// native), that is the task's num_retries. Elsewhere (Service Bus) the
// task keeps the num_retries it was pushed with and its budget is that
// less its deliveries that failed or lost their lock, which the peek
// cannot tell from the free requeues: the range is printed, and a dead
// letter has none left until `dlq requeue`, which restores num_retries.
func retriesLeftText(q *jobq.Queue, t *jobq.Task, dead bool, deliveries int, inFlight bool) string {
	if t == nil {
		return ""
	}
	n := t.NumRetries
	switch {
	case q.Capabilities().Level(driver.InPlaceUpdate) == driver.Native:
		return strconv.Itoa(n)
	case dead:
		return fmt.Sprintf("none (dlq requeue restores num_retries %d)", n)
	}
	ended := deliveries
	if inFlight {
		ended-- // the delivery under way has not used up a retry yet
	}
	if ended <= 0 || n == 0 {
		return strconv.Itoa(n)
	}
	return fmt.Sprintf("%d to %d (num_retries %d less those of its %d past deliveries that failed or lost their lock)", max(0, n-ended), n, n, ended)
}

// attemptJSON is one attempt as the --json outputs print it.
type attemptJSON struct {
	Delivery int        `json:"delivery"`
	Outcome  string     `json:"outcome"`
	Worker   string     `json:"worker,omitempty"`
	Host     string     `json:"host,omitempty"`
	Start    *time.Time `json:"start,omitempty"`
	End      *time.Time `json:"end,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`
	Detail   string     `json:"detail,omitempty"`
	// RetryDelayS is how long the retry that followed waited (the retry
	// backoff), in seconds.
	RetryDelayS *float64 `json:"retry_delay_s,omitempty"`
	// Env is the worker's environment label (worker --env-label).
	Env string `json:"env,omitempty"`
	// LostS is the work a stopped attempt lost (since its last
	// checkpoint), SavedS the work its checkpoints kept, in seconds.
	LostS  *float64 `json:"lost_s,omitempty"`
	SavedS *float64 `json:"saved_s,omitempty"`
}

func attemptsJSON(as []jobq.Attempt) []attemptJSON {
	out := make([]attemptJSON, len(as))
	for i, a := range as {
		out[i] = attemptJSON{Delivery: a.Delivery, Outcome: string(a.Outcome), Worker: a.Worker, Host: a.Host,
			Start: timePtr(a.Start), End: timePtr(a.End), ExitCode: a.ExitCode, Detail: a.Detail}
		out[i].Env = a.Env
		for _, f := range []struct {
			d   time.Duration
			dst **float64
		}{{a.RetryDelay, &out[i].RetryDelayS}, {a.Lost, &out[i].LostS}, {a.Saved, &out[i].SavedS}} {
			if f.d > 0 {
				s := f.d.Seconds()
				*f.dst = &s
			}
		}
	}
	return out
}

// printAttempts writes the attempt table, with credentials in the details
// redacted unless show.
func printAttempts(w io.Writer, as []jobq.Attempt, show bool) error {
	if len(as) == 0 {
		fmt.Fprintln(w, "no recorded attempts")
		return nil
	}
	t := newTable(w, "DELIVERY", "OUTCOME", "WORKER", "HOST", "START", "END", "DETAIL")
	for _, a := range as {
		outcome := string(a.Outcome)
		if a.ExitCode != nil {
			outcome += " (exit " + strconv.Itoa(*a.ExitCode) + ")"
		}
		worker, host := a.Worker, a.Host
		if a.Outcome == jobq.OutcomeLeaseExpired && worker == "" {
			worker, host = "(lost mid-task)", "?"
		}
		detail := strings.ReplaceAll(shownText(a.Detail, show), "\n", " ")
		if a.RetryDelay > 0 {
			detail = "retried after " + roundDuration(a.RetryDelay) + "; " + detail
		}
		switch {
		case a.Saved > 0:
			detail = "lost " + roundDuration(a.Lost) + ", checkpoint saved " + roundDuration(a.Saved) + "; " + detail
		case a.Lost > 0:
			// No checkpoint (a worker without --checkpoints): nothing saved.
			detail = "lost " + roundDuration(a.Lost) + "; " + detail
		}
		if a.Env != "" && a.Env != host {
			host += " (" + a.Env + ")"
		}
		t.row(a.Delivery, outcome, orDash(worker), orDash(host),
			timeOrDash(a.Start), timeOrDash(a.End), truncate(detail, 80))
	}
	return t.flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// attemptSummary is a short form of a history for one table cell, such as
// "failure(1),lease-expired,failure(1)"; "-" when there is none.
func attemptSummary(as []jobq.Attempt) string {
	if len(as) == 0 {
		return "-"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = string(a.Outcome)
		if a.ExitCode != nil {
			parts[i] += "(" + strconv.Itoa(*a.ExitCode) + ")"
		}
	}
	return truncate(strings.Join(parts, ","), 60)
}

// envText is NAME=VALUE, the value quoted when it holds white space,
// quotes or other characters a reader could not see.
func envText(e jobq.EnvVar) string {
	v := e.Value
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == '\'' || r == '\\' || r == 0x7f }) {
		v = strconv.Quote(v)
	}
	return e.Name + "=" + v
}

// multiline is a value that may span lines (a command read from standard
// input keeps its newline) as one row: without the trailing newline, and
// each further line indented under the first.
func multiline(s string) string {
	s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
	return strings.ReplaceAll(s, "\n", "\n\t")
}
