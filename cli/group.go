package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bound"
)

// groupRedraw is how often `group` reads the counts while it follows a
// group on a terminal or waits for its end.
const groupRedraw = time.Second

func (a *app) groupCommand() *cobra.Command {
	var asJSON, wait bool
	var timeout time.Duration
	var thenIfFlag string
	cmd := &cobra.Command{
		Use:   "group NAME [--json] [--wait] | group NAME then COMMAND [--then-if all-succeeded|always]",
		Short: "Show a group's counts by state, its rate and ETA; --wait for its end",
		Long: `Show the counts of the tasks pushed with --group NAME (or the group a
push without --group named and printed): pushed, queued, delayed, running,
succeeded, failed (attempts that failed and were retried), dead-lettered
and cancelled, with the rate of ends and the time left at that rate.

On a terminal the line is redrawn every second until the group ends or
Ctrl-C; elsewhere (or with --json) the counts are printed once. --json
prints one object (members in docs/campaigns.md).

--wait waits for every task of the group to end and exits as push --wait
does: 0 when all succeeded, 1 when any was dead-lettered or cancelled
(with a summary), 1 after --timeout. With --json it prints the final
counts.

The counts are exact on Postgres, Redis, SQLite and mem: they change in the
same transaction or script as each push and settlement. On Storage Queue
and Service Bus they are read from the result records (a read per task;
eventually consistent). Redis and the Azure backends do not split the open
tasks into queued, delayed and running (shown together as open).

'group NAME then COMMAND' adds the group's step: one task that runs
COMMAND when every task of the group has ended (exactly once, whatever the
number of workers), with the group's final counts in its environment:
JOBQ_GROUP, JOBQ_GROUP_PUSHED, JOBQ_GROUP_SUCCEEDED, JOBQ_GROUP_FAILED,
JOBQ_GROUP_DEAD_LETTERED, JOBQ_GROUP_CANCELLED. --then-if all-succeeded
(the default) runs it only when every task succeeded, else cancels it with
a reason; --then-if always runs it in any case. 'push --group NAME --then
COMMAND' does the same as it pushes. A group has one step; the group's
counts show it. Workers release it within 2 s of the group's end (so does
'jobq QUEUE scheduler' where no worker runs).`,
		Example: `  jobq sqlite://./work.db push --group sweep-1 < commands.txt
  jobq sqlite://./work.db group sweep-1
  jobq sqlite://./work.db group sweep-1 --json | jq .succeeded
  jobq sqlite://./work.db group sweep-1 --wait --timeout 12h
  jobq sqlite://./work.db group sweep-1 then 'python aggregate.py' --then-if always`,
		Args: groupArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 3 {
				require, err := thenIf(thenIfFlag)
				if err != nil {
					return err
				}
				return a.withQueue(ctx, func(q *jobq.Queue) error {
					return a.pushThen(ctx, q, args[0], args[2], require, nil, "")
				})
			}
			if cmd.Flags().Changed("then-if") {
				return usageError("--then-if says when the step of 'group NAME then COMMAND' runs; give it with then")
			}
			if cmd.Flags().Changed("timeout") && !wait {
				return usageError("--timeout bounds group --wait; give --wait with it")
			}
			return a.readQueue(ctx, func(q *jobq.Queue) error {
				g := &groupView{a: a, q: q, name: args[0], asJSON: asJSON}
				if wait {
					return g.wait(ctx, timeout)
				}
				return g.show(ctx)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the counts as one JSON object")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until every task of the group has ended; exit 0 only when all succeeded")
	cmd.Flags().Var(durationFlag(&timeout), "timeout", "with --wait: stop waiting after this long (exit 1; the tasks keep running); 0: no limit")
	cmd.Flags().StringVar(&thenIfFlag, "then-if", "all-succeeded", "with then: run the step when all-succeeded (else cancel it) or always")
	return cmd
}

// groupArgs accepts NAME, or NAME then COMMAND.
func groupArgs(_ *cobra.Command, args []string) error {
	switch {
	case len(args) == 1:
		return nil
	case len(args) == 3 && args[1] == "then" && strings.TrimSpace(args[2]) == "":
		return usageError("group NAME then COMMAND: the command is empty; give the command the group's step runs")
	case len(args) == 3 && args[1] == "then":
		return nil
	case len(args) >= 2 && args[1] == "then":
		return usageError("group NAME then COMMAND: give the step's command as one argument (quote it)")
	}
	return usageError("group takes a group's NAME, or NAME then COMMAND; got %d arguments", len(args))
}

func (a *app) groupsCommand() *cobra.Command {
	var asJSON, work bool
	var limit int
	cmd := &cobra.Command{
		Use:   "groups [-n N] [--json]",
		Short: "List the recent groups with their counts",
		Long: `List the queue's groups, most recently changed first, with their counts:
pushed, ended (succeeded, dead-lettered, cancelled) and open. --json prints
one object per line.`,
		Example: `  jobq sqlite://./work.db groups
  jobq sqlite://./work.db groups -n 5 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.readQueue(ctx, func(q *jobq.Queue) error {
				gs, err := q.Admin().Groups(ctx, limit)
				if err != nil {
					return featureFailure(err)
				}
				if len(gs) == 0 && !asJSON {
					fmt.Fprintln(a.stdout, "no groups in this queue")
					return nil
				}
				if work {
					return a.printGroupsWork(ctx, q, gs, asJSON)
				}
				if asJSON {
					enc := json.NewEncoder(a.stdout)
					for _, g := range gs {
						if err := enc.Encode(toGroupJSON(g)); err != nil {
							return failure(err)
						}
					}
					return nil
				}
				return printGroups(a.stdout, gs)
			})
		},
	}
	countFlag(cmd.Flags(), &limit, "limit", "n", 20, groupLimitRange, "how many groups to list")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per group")
	cmd.Flags().BoolVar(&work, "work", false, "add each group's work done, lost and saved by checkpoints, from its result records")
	return cmd
}

// groupView shows one group.
type groupView struct {
	a      *app
	q      *jobq.Queue
	name   string
	asJSON bool
	// first and firstAt are the first reading and when it was taken, for
	// the rate.
	first   *driver.GroupCounters
	firstAt time.Time
	// work is the group's work totals (groupwork.go), read before the
	// final print; nil when unknown.
	work *jobq.GroupWork
	// step is the group's step, read before the counts are printed.
	step *jobq.GroupStep
}

// show prints the counts once, or follows them live on a terminal until
// the group ends or ctx does.
func (g *groupView) show(ctx context.Context) error {
	if g.asJSON || !g.a.toPerson() {
		c, err := g.q.Admin().Group(ctx, g.name)
		if err != nil {
			return featureFailure(err)
		}
		g.loadWork(ctx)
		return g.print(c, 0)
	}
	live := &liveLine{w: g.a.stderr}
	c, err := g.q.Admin().WaitGroup(ctx, g.name, groupRedraw, func(c *driver.GroupCounters) error {
		live.set(g.line(c))
		return nil
	})
	live.clear()
	if err != nil && errcode.Of(err) != errcode.Canceled {
		return featureFailure(err)
	}
	if c == nil {
		return nil
	}
	g.loadWork(ctx)
	return g.print(c, 0)
}

// wait waits for the group's end and exits as push --wait does.
func (g *groupView) wait(ctx context.Context, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var live *liveLine
	if g.a.toPerson() {
		live = &liveLine{w: g.a.stderr}
	}
	var last *driver.GroupCounters
	c, err := g.q.Admin().WaitGroup(ctx, g.name, groupRedraw, func(c *driver.GroupCounters) error {
		last = c
		if live != nil {
			live.set(g.line(c))
		}
		return nil
	})
	if live != nil {
		live.clear()
	}
	if err != nil {
		if errcode.Of(err) == errcode.DeadlineExceeded && last != nil {
			return failure(fmt.Errorf("group %s did not end within %s: %s; the tasks keep running (to wait again: %s)",
				g.name, formatDuration(timeout), g.line(last), g.a.commandHint("group "+g.name+" --wait")))
		}
		return featureFailure(err)
	}
	g.loadWork(ctx)
	if err := g.print(c, 0); err != nil {
		return err
	}
	if c.DeadLettered+c.Cancelled > 0 {
		var lists []string
		for _, s := range []struct {
			state string
			n     int64
		}{{"dead-lettered", c.DeadLettered}, {"cancelled", c.Cancelled}} {
			if s.n > 0 {
				lists = append(lists, g.a.commandHint("results --jsonl --group "+g.name+" --state "+s.state))
			}
		}
		hint := strings.Join(lists, " and ")
		if n := unrecorded(g.work, c.Ended()); n > 0 {
			// The records of tasks pushed again in another group moved
			// there: the list cannot show them under this group.
			hint += fmt.Sprintf(", which leaves out the %s with no record in %s (a task keeps only the record of its latest run: one pushed again in another group is listed under that group)",
				countOf(n, "ended task"), g.name)
		}
		return failure(fmt.Errorf("group %s ended: %d of %s did not succeed (%d dead-lettered, %d cancelled); to list them: %s",
			g.name, c.DeadLettered+c.Cancelled, countOf(c.Pushed, "task"), c.DeadLettered, c.Cancelled, hint))
	}
	return nil
}

// print prints c, on standard output, with the group's step.
func (g *groupView) print(c *driver.GroupCounters, _ int) error {
	if s, err := g.q.Admin().GroupStep(context.Background(), g.name); err == nil {
		g.step = s
	}
	if g.asJSON {
		enc := json.NewEncoder(g.a.stdout)
		enc.SetIndent("", "  ")
		j := toGroupJSON(c)
		j.Work = g.workJSON()
		if s := g.step; s != nil {
			j.Step = &stepJSON{ID: s.ID, State: s.State}
			if s.State == "held" {
				j.Step.ThenIf = thenIfName(s.Require)
			}
		}
		if err := enc.Encode(j); err != nil {
			return failure(err)
		}
		return nil
	}
	text := g.line(c)
	if w := workLine(g.work, c.Ended()); w != "" {
		text += "\n" + w
	}
	_, err := fmt.Fprintln(g.a.stdout, text)
	if err == nil && g.step != nil {
		_, err = fmt.Fprintln(g.a.stdout, stepText(g.step))
	}
	if err != nil {
		return failure(err)
	}
	return nil
}

// stepText says where a group's step is.
func stepText(s *jobq.GroupStep) string {
	if s.State == "held" {
		return fmt.Sprintf("step: task %s held: it runs when the group ends (--then-if %s)", s.ID, thenIfName(s.Require))
	}
	return fmt.Sprintf("step: task %s %s", s.ID, s.State)
}

// line is the one-line summary of c, with the rate of ends since the
// first reading and the time left at that rate.
func (g *groupView) line(c *driver.GroupCounters) string {
	if g.first == nil {
		g.first, g.firstAt = c, time.Now()
	}
	text := groupText(c)
	elapsed := time.Since(g.firstAt)
	ended := c.Ended() - g.first.Ended()
	if elapsed < minRateWindow || ended <= 0 {
		return text
	}
	rate := float64(ended) / elapsed.Seconds()
	text += fmt.Sprintf("; %s tasks/s", formatRate(rate))
	if left := c.Open(); left > 0 {
		eta := time.Duration(float64(left) / rate * float64(time.Second))
		text += ", ETA " + formatDuration(eta.Round(time.Second))
	}
	return text
}

// groupText is c's counts on one line.
func groupText(c *driver.GroupCounters) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d/%d ended (%d succeeded, %d dead-lettered, %d cancelled); ", c.Name, c.Ended(), c.Pushed, c.Succeeded, c.DeadLettered, c.Cancelled)
	if c.Split {
		fmt.Fprintf(&b, "%d queued, %d delayed, %d running", c.Queued, c.Delayed, c.Running)
		// The open tasks in none of those wait for their parents (or
		// were deleted by clear): say so, or the group seems to wait
		// for nothing.
		if held := c.Open() - c.Queued - c.Delayed - c.Running; held > 0 {
			fmt.Fprintf(&b, ", %d held or cleared", held)
		}
	} else {
		fmt.Fprintf(&b, "%d open", c.Open())
	}
	if c.Failed > 0 {
		fmt.Fprintf(&b, "; %d failed attempts retried", c.Failed)
	}
	if c.Done() {
		b.WriteString("; done")
	}
	return b.String()
}

// groupJSON is the --json form of a group's counts.
type groupJSON struct {
	Name         string    `json:"name"`
	Pushed       int64     `json:"pushed"`
	Queued       *int64    `json:"queued"`
	Delayed      *int64    `json:"delayed"`
	Running      *int64    `json:"running"`
	Open         int64     `json:"open"`
	Succeeded    int64     `json:"succeeded"`
	Failed       int64     `json:"failed"`
	DeadLettered int64     `json:"dead_lettered"`
	Cancelled    int64     `json:"cancelled"`
	Done         bool      `json:"done"`
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
	// Work is what the ended tasks cost in worker time; omitted where
	// the queue's records cannot be listed.
	Work *groupWorkJSON `json:"work,omitempty"`
	// Step is the group's step, where it has one (show and --wait only).
	Step *stepJSON `json:"step,omitempty"`
}

// stepJSON is a group's step in --json.
type stepJSON struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	ThenIf string `json:"then_if,omitempty"`
}

// toGroupJSON is c as JSON; queued, delayed and running are null where
// the backend does not split the open tasks.
func toGroupJSON(c *driver.GroupCounters) groupJSON {
	j := groupJSON{Name: c.Name, Pushed: c.Pushed, Open: c.Open(), Succeeded: c.Succeeded, Failed: c.Failed,
		DeadLettered: c.DeadLettered, Cancelled: c.Cancelled, Done: c.Done(), Created: c.Created.UTC(), Updated: c.Updated.UTC()}
	if c.Split {
		j.Queued, j.Delayed, j.Running = &c.Queued, &c.Delayed, &c.Running
	}
	return j
}

// printGroups prints gs as a table.
func printGroups(w io.Writer, gs []*driver.GroupCounters) error {
	t := newTable(w, "GROUP", "PUSHED", "SUCCEEDED", "DEAD-LETTERED", "CANCELLED", "OPEN", "UPDATED")
	for _, g := range gs {
		t.row(g.Name, g.Pushed, g.Succeeded, g.DeadLettered, g.Cancelled, g.Open(), g.Updated.Local().Format(time.DateTime))
	}
	if err := t.flush(); err != nil {
		return failure(err)
	}
	return nil
}

// featureFailure maps an error of a call that needs a feature (groups,
// the worker registry) to an exit code: a bad argument or a backend
// without the feature is a usage error, the rest a failure.
func featureFailure(err error) error {
	switch errcode.Of(err) {
	case errcode.InvalidArgument, errcode.Unimplemented:
		return asUsage(err)
	}
	return failure(err)
}

// newGroupName is the group of a push without --group: the push's time
// and a random suffix, e.g. push-20261128-200512-k3x9.
func newGroupName(now time.Time) string {
	return "push-" + now.UTC().Format("20060102-150405") + "-" + strings.ToLower(rand.Text()[:4])
}

// errNoGroups is the refusal of --group on a backend without groups.
var errNoGroups = errors.New("this backend cannot count tasks by group")

// groupLimitRange bounds groups -n.
var groupLimitRange = bound.Ints{Min: 1, Max: 100000}

// pushGroup is the group of a push: the --group flag's, or a new name
// where the backend counts groups (none where it does not). A --group the
// backend cannot count is a usage error, before anything is pushed.
func (a *app) pushGroup(q *jobq.Queue, flag string) (string, error) {
	level := q.Capabilities().Level(driver.Groups)
	switch {
	case flag != "" && level == driver.Unsupported:
		msg := "push --group: " + errNoGroups.Error()
		if fb := q.Capabilities().Features[driver.Groups].Fallback; fb != "" {
			msg += " (" + fb + ")"
		}
		return "", usageError("%s; see 'jobq backends' (groups) for the backends that do", msg)
	case flag != "":
		return flag, nil
	case level == driver.Unsupported:
		return "", nil
	}
	return newGroupName(time.Now()), nil
}
