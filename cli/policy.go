package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/shellword"
	"github.com/jobq/jobq/internal/statsreport"
)

func (a *app) policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Set, list and unset the queue's policies: caps, rates, max depth, retention, retry backoff, results",
		Long: `Queue policies are kept in the backend, so every worker on every machine
sees the same ones (see docs/policies.md).

  concurrency KEY=LIMIT     at most LIMIT tasks with --concurrency-key KEY run at once
  rate KEY=COUNT/PERIOD     at most COUNT tasks with --rate-limit-key KEY start in any
                            rolling window of PERIOD (30s, 1m, 1h, or a bare s/m/h)
  max-depth N               a push that would make the queue hold more than N tasks
                            fails (or waits, with push --wait-for-room)
  retention D               keep each task's result record for D after it ends
                            (default 7d), e.g. 2d; see docs/results.md
  retry-backoff BASE,CAP    retry a failed task after about BASE, doubling per
                            failure up to CAP, with jitter (default 10s,10m);
                            push --retry-backoff overrides it per task
  results all|failed|none   which tasks keep a result record: all (default;
                            a success keeps the last 1 KiB of its output),
                            failed (full records of failures, a bare state
                            for successes) or none (wait and result refuse)

Backends that cannot enforce a kind refuse it; on Azure Storage Queue and
Service Bus each worker enforces caps and rates for its own process only
(run 'jobq backends').`,
		Example: `  jobq sqlite://./work.db policy set concurrency gpu=2
  jobq sqlite://./work.db policy list
  jobq sqlite://./work.db policy unset concurrency gpu`,
	}
	cmd.AddCommand(a.policySetCommand(), a.policyUnsetCommand(), a.policyListCommand())
	return cmd
}

func (a *app) policySetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "set KIND SPEC",
		Short: "Set a policy, replacing one of the same kind and key",
		Example: `  jobq sqlite://./work.db policy set concurrency gpu=2
  jobq sqlite://./work.db policy set rate licence-server=10/1m
  jobq sqlite://./work.db policy set max-depth 10000
  jobq sqlite://./work.db policy set retention 2d
  jobq sqlite://./work.db policy set retry-backoff 10s,1h
  jobq sqlite://./work.db policy set results failed`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := hooks.ParsePolicy(args[0], args[1])
			if err != nil {
				return asUsage(err)
			}
			return a.withQueue(cmd.Context(), func(q *jobq.Queue) error {
				if err := q.Admin().SetPolicy(cmd.Context(), p); err != nil {
					return policyFailure(err)
				}
				fmt.Fprintf(a.stdout, "set %s\n", p)
				return nil
			})
		},
	}
}

func (a *app) policyUnsetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "unset KIND [KEY]",
		Short: "Remove a policy (concurrency KEY, rate KEY, max-depth, retention, retry-backoff or results)",
		Example: `  jobq sqlite://./work.db policy unset concurrency gpu
  jobq sqlite://./work.db policy unset max-depth
  jobq sqlite://./work.db policy unset retention`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, key := driver.PolicyKind(args[0]), ""
			if len(args) == 2 {
				key = args[1]
			}
			return a.withQueue(cmd.Context(), func(q *jobq.Queue) error {
				had, err := q.Admin().UnsetPolicy(cmd.Context(), kind, key)
				if err != nil {
					return policyFailure(err)
				}
				what := string(kind)
				if key != "" {
					what += " " + key
				}
				if !had {
					fmt.Fprintf(a.stdout, "no %s policy was set\n", what)
					return nil
				}
				fmt.Fprintf(a.stdout, "unset %s\n", what)
				return nil
			})
		},
	}
}

func (a *app) policyListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the queue's policies",
		Long: `List the queue's policies, one per line as 'policy set' takes them
(concurrency gpu=2, retention 48h), or with --json as an array of objects with
kind, key and the policy's values.`,
		Example: `  jobq sqlite://./work.db policy list
  jobq sqlite://./work.db policy list --json | jq -r '.[] | select(.kind == "concurrency") | .key'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.readQueue(cmd.Context(), func(q *jobq.Queue) error {
				pols, err := q.Admin().Policies(cmd.Context())
				if err != nil {
					return policyFailure(err)
				}
				if asJSON {
					out := make([]policyJSON, len(pols))
					for i, p := range pols {
						out[i] = toPolicyJSON(p)
					}
					enc := json.NewEncoder(a.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(out)
				}
				if len(pols) == 0 {
					fmt.Fprintln(a.stdout, "no policies")
					return nil
				}
				for _, p := range pols {
					fmt.Fprintln(a.stdout, p)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

// policyJSON is a policy as `policy list --json` prints it: kind, key
// and limit, period_s for rate and retention, base_s and cap_s (no limit)
// for retry-backoff, value (all, failed or none) for results.
type policyJSON struct {
	Kind    string   `json:"kind"`
	Key     string   `json:"key,omitempty"`
	Value   string   `json:"value,omitempty"`
	Limit   *int64   `json:"limit,omitempty"`
	PeriodS *float64 `json:"period_s,omitempty"`
	BaseS   *float64 `json:"base_s,omitempty"`
	CapS    *float64 `json:"cap_s,omitempty"`
}

func toPolicyJSON(p driver.Policy) policyJSON {
	out := policyJSON{Kind: string(p.Kind), Key: p.Key}
	seconds := func(d time.Duration) *float64 {
		s := d.Seconds()
		return &s
	}
	switch p.Kind {
	case driver.RetryBackoffPolicy:
		base, limit := p.Backoff()
		out.BaseS, out.CapS = seconds(base), seconds(limit)
	case driver.RetentionPolicy:
		out.PeriodS = seconds(p.Period)
	case driver.ResultsPolicy:
		out.Value = driver.ResultsMode(p.Limit).String()
	default:
		out.Limit = &p.Limit
		if p.Period > 0 {
			out.PeriodS = seconds(p.Period)
		}
	}
	return out
}

// withQueue opens the queue, runs fn and closes it.
func (a *app) withQueue(ctx context.Context, fn func(q *jobq.Queue) error) error {
	return a.withOpen(ctx, a.open, fn)
}

// readQueue is withQueue for a command that only reads the queue
// (openReadOnly).
func (a *app) readQueue(ctx context.Context, fn func(q *jobq.Queue) error) error {
	return a.withOpen(ctx, a.openReadOnly, fn)
}

func (a *app) withOpen(ctx context.Context, open func(context.Context) (*jobq.Queue, error), fn func(q *jobq.Queue) error) error {
	q, err := open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	return fn(q)
}

// policyFailure maps an error to an exit code: invalid input is a usage
// error, the rest (Unimplemented included) a failure.
func policyFailure(err error) error {
	if errcode.Of(err) == errcode.InvalidArgument {
		return asUsage(err)
	}
	return failure(err)
}

// printPauses writes one "paused" line per pause of the queue: what, since
// when and by whom.
func printPauses(w io.Writer, pols []driver.Policy) {
	for _, s := range driver.Pauses(pols) {
		fmt.Fprintf(w, "paused\t%s since %s (%s ago) by %s; `%s` lifts it\n", s.Scope(), s.Since.Local().Format(time.DateTime), roundETA(time.Since(s.Since)), s.By, resumeCommand(s))
	}
}

// resumeCommand is the command that lifts s.
func resumeCommand(s driver.PauseState) string {
	cmd := "resume"
	if s.TaskKind != "" {
		cmd += " --kind " + shellword.Quote(s.TaskKind)
	}
	if s.Key != "" {
		cmd += " --key " + shellword.Quote(s.Key)
	}
	return cmd
}

// printKeys writes the per-key part of `stats`: what each policy key is
// doing.
func printKeys(w io.Writer, r *statsreport.Keys) error {
	if p, ok := r.Policy(driver.MaxDepthPolicy, ""); ok {
		fmt.Fprintf(w, "max-depth: %d\n", p.Limit)
	}
	if len(r.Stats) == 0 {
		return nil
	}
	t := newTable(w, "KIND", "KEY", "IN FLIGHT", "LIMIT", "WAITING", "RATE WAIT")
	for _, ks := range r.Stats {
		limit, wait, inFlight := "-", "-", strconv.FormatInt(ks.InFlight, 10)
		if p, ok := r.Policy(ks.Kind, ks.Key); ok {
			limit = strconv.FormatInt(p.Limit, 10)
			if p.Kind == driver.RatePolicy {
				limit = fmt.Sprintf("%d/%s", p.Limit, formatDuration(p.Period))
				inFlight = fmt.Sprintf("%d started in window", ks.Admitted)
				wait = "~" + roundETA(statsreport.RateWait(p, ks))
			}
		}
		waiting := strconv.FormatInt(ks.Waiting, 10)
		if ks.Waiting < 0 {
			waiting, wait = "?", "-"
		}
		if r.PerWorker {
			inFlight = "per worker"
		}
		t.row(ks.Kind, ks.Key, inFlight, limit, waiting, wait)
	}
	return t.flush()
}

// waiting reports, at most every few seconds, that push --wait-for-room is
// waiting for the queue to drain.
func (p *pusher) waiting(qf *driver.QueueFullError, pause time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.lastFull) < 5*time.Second {
		return
	}
	p.lastFull = time.Now()
	p.a.log.Info("queue is full; waiting for room", "depth", qf.Depth, "max_depth", qf.MaxDepth, "retry_in", pause.Round(time.Millisecond))
}
