package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// filterFlags are the flags that build a jobq.Filter.
type filterFlags struct {
	state, kind, key, errText, since, until, exitCode string
	all, dryRun, yes, asJSON                          bool
	batch                                             int
	// verb is the command (requeue, cancel, purge) and states the --state
	// values it takes, for messages; purge alone takes record states
	// (succeeded, cancelled).
	verb   string
	states []string
}

// records reports whether --state may name result records.
func (ff *filterFlags) records() bool { return slices.Contains(ff.states, "succeeded") }

// statesText lists the states the command takes: "dead-lettered", or
// "dead-lettered, queued, succeeded or cancelled".
func (ff *filterFlags) statesText() string { return orList(ff.states) }

// add registers the flags on fs; action says what the command does, for
// the help.
func (ff *filterFlags) add(fs *pflag.FlagSet, states string) {
	fs.StringVar(&ff.state, "state", "", "where the tasks are: "+states)
	fs.StringVar(&ff.kind, "kind", "", "only tasks of this kind (Task.Kind)")
	fs.StringVar(&ff.key, "key", "", "only tasks with this concurrency or rate-limit key")
	fs.StringVar(&ff.exitCode, "exit-code", "", "only dead letters whose last attempt exited with this code (0-255, or a negative code a Go handler set)")
	fs.StringVar(&ff.errText, "error", "", "only dead letters whose reason, output tail or recorded error contains this text (case-sensitive)")
	fs.StringVar(&ff.since, "since", "", "only tasks queued (dead letters: dead-lettered) at or after this: a duration ago (12h, 2d) or a time (2026-11-27, 2026-11-27T18:00:00Z)")
	fs.StringVar(&ff.until, "until", "", "only tasks queued (dead letters: dead-lettered) before this; same forms as --since")
	fs.BoolVar(&ff.dryRun, "dry-run", false, "count what would be touched; change nothing")
	fs.BoolVarP(&ff.yes, "yes", "y", false, "do not ask for confirmation (needed when standard input is not a terminal)")
	fs.IntVar(&ff.batch, "batch", 500, "tasks read per page and changed per batch (1-10000)")
	if fs.Lookup("json") == nil { // cancel has its own, which the filter shares
		fs.BoolVar(&ff.asJSON, "json", false, `print {"scanned", "matched", "done", "pending", "dry_run", "partial"}`)
	}
}

// set reports whether any filter flag was given.
func (ff *filterFlags) set(fs *pflag.FlagSet) bool {
	for _, name := range []string{"state", "kind", "key", "exit-code", "error", "since", "until", "all", "dry-run", "batch"} {
		if fs.Changed(name) {
			return true
		}
	}
	return false
}

// filter parses the flags into a Filter, or returns a usage error that
// names the flag and the fix.
func (ff *filterFlags) filter(now time.Time) (jobq.Filter, error) {
	f := jobq.Filter{State: ff.state, Kind: ff.kind, Key: ff.key, ErrorContains: ff.errText, All: ff.all, DryRun: ff.dryRun, BatchSize: ff.batch}
	if err := deadLetteredAlias(ff.state); err != nil {
		return f, err
	}
	switch ff.state {
	case "", "queued", "dead-lettered":
		// The library refuses one the command does not take, saying why.
	case "succeeded", "cancelled":
		if !ff.records() {
			return f, usageError("--state %s names result records, which only purge deletes (jobq QUEUE purge --state %s): use %s here", ff.state, ff.state, ff.statesText())
		}
		if ff.kind != "" || ff.key != "" {
			return f, usageError("--state %s filters result records, which do not keep the task's kind or key: drop --kind/--key, or filter with --exit-code, --error, --since or --until", ff.state)
		}
	default:
		return f, usageError("--state %q is not a state %s takes: use %s", ff.state, ff.verb, ff.statesText())
	}
	if ff.exitCode != "" {
		c, err := strconv.Atoi(ff.exitCode)
		if err != nil {
			return f, usageError("--exit-code %q is not a number: give the exit status, such as --exit-code 137", ff.exitCode)
		}
		if c > 255 {
			return f, usageError("--exit-code %d is out of range: a command exits with 0-255 (a Go handler may set a negative code), so no dead letter matches", c)
		}
		f.ExitCode = &c
	}
	var err error
	if f.Since, err = parseWhen(now, "--since", ff.since); err != nil {
		return f, err
	}
	if f.Until, err = parseWhen(now, "--until", ff.until); err != nil {
		return f, err
	}
	if ff.batch < 1 || ff.batch > 10000 {
		return f, usageError("--batch is %d; use 1 to 10000", ff.batch)
	}
	return f, nil
}

// deadLetteredAlias is the usage error for a --state that calls the
// dead-lettered state by another name (failed, dead, dlq); nil for any
// other.
func deadLetteredAlias(state string) error {
	switch state {
	case "failed", "dead", "dlq":
		return usageError("--state %s: the state is called dead-lettered (--state dead-lettered)", state)
	}
	return nil
}

// whenLayouts are the time forms --since and --until take besides a
// duration ago.
var whenLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}

// parseWhen reads a --since or --until value: a duration before now, or a
// time (local time where it has no zone). "" is the zero time.
func parseWhen(now time.Time, flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range whenLayouts {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageError("%s %q is neither a duration ago (12h, 2d, 90m) nor a time (2026-11-27, 2026-11-27T18:00:00Z)", flag, s)
}

// bulkVerb is one bulk command: its verb and how it calls the library.
type bulkVerb struct {
	verb, past, noun string
	// needAll: with no filter, the command needs --all.
	needAll bool
	run     func(*jobq.Admin) func(context.Context, jobq.Filter) (jobq.BulkResult, error)
}

// runBulk runs a bulk action: it counts first (a dry run), asks for
// confirmation unless --yes or --dry-run, then runs it and prints what it
// did.
func (a *app) runBulk(cmd *cobra.Command, ff *filterFlags, v bulkVerb) error {
	ctx := cmd.Context()
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	if err := v.checkFiltered(f, ff.all); err != nil {
		return err
	}
	q, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	act := v.run(q.Admin())
	if !f.DryRun && !ff.yes {
		count := f
		count.DryRun = true
		res, err := act(ctx, count)
		if err != nil {
			return bulkFailure(err)
		}
		if res.Matched == 0 {
			// Nothing to ask about, and nothing to do: not a dry run,
			// which the user did not ask for.
			return a.printBulk(v, res, false, ff.asJSON)
		}
		question := fmt.Sprintf("%s %d %s of %s (%d scanned)?", capitalize(v.verb), res.Matched, v.nounFor(res.Matched), hooks.URL(q), res.Scanned)
		if res.Partial != "" {
			question = fmt.Sprintf("%s More may match beyond what this backend can see: %s.", question, res.Partial)
		}
		if err := a.confirm(question); err != nil {
			return err
		}
	}
	// Ctrl-C or SIGTERM stops the run between batches, so that it can say
	// what it did; once it has returned, another kills the process.
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := act(sctx, f)
	interrupted := sctx.Err() != nil && ctx.Err() == nil // before stop, which ends sctx
	stop()
	if err != nil {
		if interrupted {
			a.printBulkStopped(v, res, "was interrupted", ff.asJSON)
			return failure(fmt.Errorf("interrupted: the %s not counted as %s above are unchanged; run the command again to finish", v.noun, v.past))
		}
		// What an action that failed part way did is worth printing;
		// a refusal did nothing, and a summary would read as success.
		if !errors.Is(err, errcode.InvalidArgument) && res.Scanned > 0 {
			a.printBulkStopped(v, res, "failed", ff.asJSON)
		}
		return bulkFailure(err)
	}
	return a.printBulk(v, res, f.DryRun, ff.asJSON)
}

// checkFiltered refuses a command that needs --all (needAll) run without
// a filter and without --all.
func (v bulkVerb) checkFiltered(f jobq.Filter, all bool) error {
	if !v.needAll || all || f.Kind != "" || f.Key != "" || f.ExitCode != nil || f.ErrorContains != "" || !f.Since.IsZero() || !f.Until.IsZero() {
		return nil
	}
	flags := "--kind, --key, --since or --until"
	switch {
	case v.noun == "dead letters":
		flags = "--kind, --key, --exit-code, --error, --since or --until"
	case strings.HasSuffix(v.noun, "records"):
		flags = "--exit-code, --error, --since or --until"
	}
	return usageError("no filter given: %s would touch every one of the %s; narrow it with %s, or say --all", v.verb, v.noun, flags)
}

// bulkFailure maps a library error: a filter the library refuses is a
// usage error.
func bulkFailure(err error) error {
	if errors.Is(err, errcode.InvalidArgument) {
		return asUsage(err)
	}
	return failure(err)
}

// printBulk prints what a bulk action did, or would do on a dry run.
func (a *app) printBulk(v bulkVerb, res jobq.BulkResult, dry, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Scanned int64  `json:"scanned"`
			Matched int64  `json:"matched"`
			Done    int64  `json:"done"`
			Pending int64  `json:"pending,omitempty"`
			DryRun  bool   `json:"dry_run"`
			Partial string `json:"partial,omitempty"`
		}{res.Scanned, res.Matched, res.Done, res.Pending, dry, res.Partial})
	}
	switch {
	case dry:
		fmt.Fprintf(a.stdout, "would %s %d %s (%d scanned); dry run, nothing changed\n", v.verb, res.Matched, v.nounFor(res.Matched), res.Scanned)
	default:
		fmt.Fprintf(a.stdout, "%s %d of %d matching %s (%d scanned)\n", v.past, res.Done, res.Matched, v.nounFor(res.Matched), res.Scanned)
		if res.Pending > 0 {
			fmt.Fprintf(a.stdout, "%d of them are recorded as cancel-requested: the worker that receives each drops it unrun\n", res.Pending)
		}
		if left := res.Matched - res.Done; left > 0 {
			why := "moved on meanwhile (a worker took them, or another command did)"
			if left == 1 {
				why = "moved on meanwhile (a worker took it, or another command did)"
			}
			if v.verb == "requeue" {
				why = "moved on meanwhile (another command requeued or purged them)"
				if left == 1 {
					why = "moved on meanwhile (another command requeued or purged it)"
				}
			}
			fmt.Fprintf(a.stdout, "%d %s\n", left, why)
		}
	}
	if res.Partial != "" {
		a.log.Warn("partial: more may match than this backend let the command see; run it again", "why", res.Partial)
	}
	return nil
}

// printBulkStopped prints what an action that stopped part way (how: it
// failed, it was interrupted) did: the matches it did not reach were not
// changed, rather than moved on as printBulk would say.
func (a *app) printBulkStopped(v bulkVerb, res jobq.BulkResult, how string, asJSON bool) {
	if asJSON {
		_ = a.printBulk(v, res, false, true)
		return
	}
	fmt.Fprintf(a.stdout, "%s %d of %d matching %s (%d scanned) before it %s\n", v.past, res.Done, res.Matched, v.nounFor(res.Matched), res.Scanned, how)
}

// nounFor is the verb's noun for n things.
func (v bulkVerb) nounFor(n int64) string {
	if n == 1 {
		return strings.TrimSuffix(v.noun, "s")
	}
	return v.noun
}

// countOf is n things for a message: "1 dead letter", "2 dead letters".
func countOf(n int64, singular string) string {
	if n == 1 {
		return "1 " + singular
	}
	return strconv.FormatInt(n, 10) + " " + singular + "s"
}

// wasWere is the verb for n things: "was" for one, else "were".
func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// hasHave is the verb for n things: "has" for one, else "have".
func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

// orList joins items for a message: "a", "a or b", "a, b or c".
func orList(items []string) string {
	n := len(items)
	if n < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:n-1], ", ") + " or " + items[n-1]
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func (a *app) requeueCommand() *cobra.Command {
	ff := filterFlags{verb: "requeue", states: []string{"dead-lettered"}}
	cmd := &cobra.Command{
		Use:   "requeue [--all | --kind K] [--key K] [--exit-code N] [--error TEXT] [--since T] [--until T] [--dry-run] [--yes]",
		Short: "Requeue (redrive) the dead letters a filter matches",
		Long: `Move the dead letters that match every filter given back to the queue, as
'dlq requeue' does for one: each keeps its attempt history, and its result
record is reset, so 'wait' waits for the new run. With no filter, every dead
letter. A cancelled task cannot be requeued (its message is not kept): push
it again.

The command pages through the dead letters (--batch at a time) and requeues
each page's matches as one batch: no lock grows with the number of dead
letters, and memory only by the IDs of the tasks requeued (about 40 bytes
each). Each task is requeued once a run: one that a worker dead-letters
again meanwhile is left for the next run. It first counts the matches (a dry run) and asks
before it changes anything, unless --yes; --dry-run only counts. Where the
backend cannot page (azqueue; see 'jobq backends', bulk-actions) it sees a
window of 32 at a time and says so when matches may be left.

Exit 0 when done, 1 when the backend failed, 2 for a bad flag or filter.`,
		Example: `  jobq sqlite://./work.db requeue --exit-code 137 --since 12h --dry-run
  jobq sqlite://./work.db requeue --error "connection reset" --yes
  jobq sqlite://./work.db requeue --kind render --since 2026-11-27 --until 2026-11-28 --json --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runBulk(cmd, &ff, bulkVerb{verb: "requeue", past: "requeued", noun: "dead letters",
				run: func(ad *jobq.Admin) func(context.Context, jobq.Filter) (jobq.BulkResult, error) {
					return func(ctx context.Context, f jobq.Filter) (jobq.BulkResult, error) { return ad.RequeueWhere(ctx, f) }
				}})
		},
	}
	ff.add(cmd.Flags(), "dead-lettered (the default and only one)")
	// As purge, cancel and dlq requeue take it; with no filter requeue
	// takes every dead letter already.
	cmd.Flags().BoolVar(&ff.all, "all", false, "every dead letter (as no filter does)")
	return cmd
}

func (a *app) purgeCommand() *cobra.Command {
	ff := filterFlags{verb: "purge", states: []string{"dead-lettered", "queued", "succeeded", "cancelled"}}
	cmd := &cobra.Command{
		Use:   "purge (--kind K | --key K | --exit-code N | --error TEXT | --since T | --until T | --all) [--state queued|succeeded|cancelled] [--dry-run] [--yes]",
		Short: "Delete the dead letters, queued tasks or result records a filter matches",
		Long: `Delete the dead letters that match every filter given, with their stashed
payloads; with --state queued, delete matching queued tasks instead (each is
recorded as cancelled, so a 'wait' on it ends rather than hangs). A purge
with no filter is refused unless --all says so.

With --state succeeded or --state cancelled, delete the result records of
tasks that ended so, before the queue's retention would expire them: the
time filters (--since, --until) are when the record was written, and
--exit-code and --error match the recorded exit code and error. Records do
not keep the task's kind or key, so --kind and --key are refused there.
Afterwards 'result' and 'wait' of a purged ID find no record. A record
purge never touches a queued or running task.

The command pages through the store (--batch at a time) and deletes each
page's matches as one batch. It first counts the matches (a dry run) and
asks before it deletes anything, unless --yes; --dry-run only counts.

Exit 0 when done, 1 when the backend failed, 2 for a bad flag or filter.`,
		Example: `  jobq sqlite://./work.db purge --error "No such file" --dry-run
  jobq sqlite://./work.db purge --until 7d --yes
  jobq sqlite://./work.db purge --state queued --kind thumbnail --yes
  jobq sqlite://./work.db purge --state succeeded --until 24h --yes
  jobq sqlite://./work.db purge --state cancelled --all --dry-run
  jobq sqlite://./work.db purge --all --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			noun := "dead letters"
			switch ff.state {
			case "queued":
				noun = "queued tasks"
			case "succeeded", "cancelled":
				noun = ff.state + " records"
			}
			return a.runBulk(cmd, &ff, bulkVerb{verb: "purge", past: "purged", noun: noun, needAll: true,
				run: func(ad *jobq.Admin) func(context.Context, jobq.Filter) (jobq.BulkResult, error) {
					return func(ctx context.Context, f jobq.Filter) (jobq.BulkResult, error) { return ad.PurgeWhere(ctx, f) }
				}})
		},
	}
	ff.add(cmd.Flags(), "dead-lettered (the default), queued, or the result records of tasks that succeeded or were cancelled (succeeded, cancelled)")
	cmd.Flags().BoolVar(&ff.all, "all", false, "purge with no other filter: every dead letter (or queued task, or record of the state)")
	return cmd
}
