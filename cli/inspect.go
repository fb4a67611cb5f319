package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/statsreport"
)

func (a *app) peekCommand() *cobra.Command {
	var n int
	var asJSON, showSecrets bool
	cmd := &cobra.Command{
		Use:   "peek [-n N] [--json]",
		Short: "Show the next tasks without taking them",
		Long: `Show up to N tasks in the order workers would receive them (where the
backend can tell), without taking them. --json prints the raw messages as a
JSON array: message_id, body (the message as stored), delivery_count,
enqueued_at, visible_at, in_flight, priority, and attempts (the attempt
history, as 'jobq QUEUE show ID' prints it). The values of task environment
variables whose names look secret (API_TOKEN, DB_PASSWORD, ...) print as
**** unless --show-secrets; so do, as xxxxx in the table, the credentials in
a command (postgres://u:PASSWORD@db). --json prints the command as stored.`,
		Example: `  jobq sqlite://./work.db peek
  jobq sqlite://./work.db peek -n 10 --json | jq '.[].body.id'`,
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
			msgs, err := q.Admin().Peek(cmd.Context(), n)
			if err != nil {
				return failure(err)
			}
			if asJSON {
				return a.printPeekJSON(q, msgs, showSecrets)
			}
			if len(msgs) == 0 {
				fmt.Fprintln(a.stdout, "(queue is empty)")
				return nil
			}
			t := newTable(a.stdout, "ID", "RETRIES", "DELIVERIES", "STATE", "ENQUEUED", "TASK")
			for _, m := range msgs {
				id, retries, what := "?", "?", "undecodable: "+fmt.Sprint(m.DecodeErr)
				if m.Task != nil {
					id, retries = m.Task.ID, strconv.Itoa(m.Task.NumRetries)
					what = truncate(taskText(m.Task, showSecrets), 80)
				}
				t.row(id, retries, m.DeliveryCount, peekState(m), timeOrDash(m.EnqueuedAt), what)
			}
			return t.flush()
		},
	}
	countFlag(cmd.Flags(), &n, "num", "n", 1, countRange, "how many tasks to show")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw messages as JSON")
	showSecretsFlag(cmd.Flags(), &showSecrets)
	return cmd
}

func peekState(m *jobq.PeekedTask) string {
	switch {
	case m.InFlight:
		return "in-flight"
	case !m.VisibleAt.IsZero() && time.Until(m.VisibleAt) > 0:
		return "delayed " + time.Until(m.VisibleAt).Round(time.Second).String()
	}
	return "ready"
}

func (a *app) printPeekJSON(q *jobq.Queue, msgs []*jobq.PeekedTask, showSecrets bool) error {
	type out struct {
		MessageID     string          `json:"message_id"`
		Body          json.RawMessage `json:"body"`
		DeliveryCount int             `json:"delivery_count"`
		EnqueuedAt    *time.Time      `json:"enqueued_at,omitempty"`
		VisibleAt     *time.Time      `json:"visible_at,omitempty"`
		InFlight      bool            `json:"in_flight"`
		Priority      int             `json:"priority"`
		Attempts      []attemptJSON   `json:"attempts"`
	}
	list := make([]out, 0, len(msgs))
	for _, m := range msgs {
		list = append(list, out{MessageID: m.MessageID, Body: displayBody(m.Body, showSecrets), DeliveryCount: m.DeliveryCount,
			EnqueuedAt: timePtr(m.EnqueuedAt), VisibleAt: timePtr(m.VisibleAt), InFlight: m.InFlight, Priority: m.Priority,
			Attempts: attemptsJSON(m.Attempts(q))})
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(list)
}

func (a *app) sizeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "size",
		Short: "Print how many tasks are queued (ready, in flight and delayed)",
		Long: `Print the number of tasks in the queue that are not dead-lettered: ready,
in flight and delayed. Approximate on backends without exact counts.`,
		Example: `  jobq sqlite://./work.db size`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := a.openReadOnly(cmd.Context())
			if err != nil {
				return err
			}
			defer q.Close()
			n, err := q.Admin().Size(cmd.Context())
			if err != nil {
				return failure(err)
			}
			fmt.Fprintln(a.stdout, n)
			return nil
		},
	}
}

func (a *app) statsCommand() *cobra.Command {
	var sample time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--sample D] [--json]",
		Short: "Print ready, in-flight, delayed and dead-lettered counts, and an estimated drain time",
		Long: `Print the queue's counts: ready, in flight, delayed, dead-lettered.

The estimated drain time comes from the net throughput measured over
--sample: the counts are read twice, D apart; the queue's size went down by
some number of tasks in that time, and the remaining tasks at that rate give
the estimate. It is the net rate, so pushes during the sample slow it, and
it is "unknown" when the queue did not shrink. --sample 0 skips it. The
estimated wait of a new task is the ready count at the same rate.

Where the queue has policies, a table follows with, per concurrency or
rate-limit key, the tasks in flight (or started in the current window),
the limit, the ready tasks waiting, and for rate keys how long the last of
them waits for the rate alone.`,
		Example: `  jobq sqlite://./work.db stats
  jobq sqlite://./work.db stats --sample 30s
  jobq sqlite://./work.db stats --sample 0 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			q, err := a.openReadOnly(ctx)
			if err != nil {
				return err
			}
			defer q.Close()
			st, err := q.Admin().Stats(ctx)
			if err != nil {
				return failure(err)
			}
			var est *statsreport.Drain
			if sample > 0 {
				if a.toPerson() {
					fmt.Fprintf(a.stderr, "jobq: sampling the queue for %s to estimate when it drains (--sample 0 skips this)...\n", formatDuration(sample))
				}
				est, st, err = measureDrain(ctx, q, st, sample)
				if err != nil {
					return failure(err)
				}
			}
			keys, err := statsreport.LoadKeys(ctx, q)
			if err != nil {
				return failure(err)
			}
			return a.printStats(statsreport.Report{Stats: st, Drain: est, Keys: keys}, sample, asJSON)
		},
	}
	sample = 3 * time.Second
	cmd.Flags().Var(durationFlag(&sample), "sample", "how long to measure throughput for the drain estimate (0: skip it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

// measureDrain reads the counts again after sample and estimates the drain
// time from the net decrease.
func measureDrain(ctx context.Context, q *jobq.Queue, first driver.Stats, sample time.Duration) (*statsreport.Drain, driver.Stats, error) {
	start := time.Now()
	select {
	case <-time.After(sample):
	case <-ctx.Done():
		return nil, first, ctx.Err()
	}
	second, err := q.Admin().Stats(ctx)
	if err != nil {
		return nil, first, err
	}
	return statsreport.Estimate(first, second, time.Since(start)), second, nil
}

func (a *app) printStats(r statsreport.Report, sample time.Duration, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r.Map())
	}
	st, est := r.Stats, r.Drain
	show := func(n int64, known bool) string {
		if !known {
			return "n/a"
		}
		return strconv.FormatInt(n, 10)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ready\t%s\n", show(st.Ready, st.Known.Ready))
	fmt.Fprintf(tw, "in flight\t%s\n", show(st.InFlight, st.Known.InFlight))
	fmt.Fprintf(tw, "delayed\t%s\n", show(st.Delayed, st.Known.Delayed))
	fmt.Fprintf(tw, "dead-lettered\t%s\n", show(st.Dead, st.Known.Dead))
	if r.Keys != nil {
		printPauses(tw, r.Keys.Policies)
	}
	if est != nil {
		fmt.Fprintf(tw, "throughput\t%.2f tasks/s (net, over %s)\n", est.Rate, formatDuration(sample))
		switch {
		case est.Known && est.ETA == 0:
			fmt.Fprintf(tw, "drain time\tqueue is empty\n")
		case est.Known:
			fmt.Fprintf(tw, "drain time\t~%s\n", roundETA(est.ETA))
		default:
			fmt.Fprintf(tw, "drain time\tunknown (the queue did not shrink during the sample; try a longer --sample)\n")
		}
		if est.Rate > 0 && st.Known.Ready {
			fmt.Fprintf(tw, "new task waits\t~%s\n", roundETA(time.Duration(float64(st.Ready)/est.Rate*float64(time.Second))))
		}
	}
	if err := tw.Flush(); err != nil || r.Keys == nil {
		return err
	}
	return printKeys(a.stdout, r.Keys)
}

func roundETA(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.1fd", d.Hours()/24)
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut at a character boundary, not inside a multi-byte one.
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
