package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/worker"
)

const scheduleLong = `A schedule pushes a task at every slot of a cron expression: five fields
(minute hour day-of-month month day-of-week, such as '*/15 * * * *' or
'0 3 * * MON-FRI') or a descriptor (@hourly, @daily, @weekly, @monthly,
@every 90m, @every 2d: whole seconds, from 1s). The expression is read in
UTC unless --tz names an IANA zone (Europe/Berlin; daylight saving
included).

There is no separate daemon: every running worker fires due slots within
about 2 seconds (unless started with --no-schedules; an idle worker sees a
schedule added meanwhile within --max-poll, 30s), and 'jobq QUEUE
scheduler' fires them for a queue without long-lived workers. However many
of them run, each slot is pushed once, with its own task ID (see
docs/operations.md for each backend's guarantee). While none runs, slots
pass unfired; --missed decides what happens when one starts again: skip
(the default) fires only a slot that is due (at most a minute late), once
fires one catch-up run for the latest missed slot.

Schedules are kept in the queue with its policies; backends that keep no
policies refuse them.`

func (a *app) scheduleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Add, list, remove, pause or resume recurring schedules",
		Long:  scheduleLong,
		Example: `  jobq sqlite://./work.db schedule add nightly-report '0 3 * * *' --tz Europe/Berlin -c './report.sh'
  jobq sqlite://./work.db schedule add sync '*/15 * * * *' --kind sync --payload '{"source": "crm"}'
  jobq sqlite://./work.db schedule list
  jobq sqlite://./work.db schedule pause nightly-report
  jobq sqlite://./work.db schedule rm nightly-report`,
	}
	cmd.AddCommand(a.scheduleAddCommand(), a.scheduleListCommand(), a.scheduleRmCommand(),
		a.schedulePauseCommand("pause"), a.schedulePauseCommand("resume"))
	return cmd
}

// scheduleFlags are schedule add's flags.
type scheduleFlags struct {
	command    string
	kind       string
	payload    string
	env        []string
	cwd        string
	numRetries int
	tz         string
	missed     string
	paused     bool
}

func (a *app) scheduleAddCommand() *cobra.Command {
	var f scheduleFlags
	cmd := &cobra.Command{
		Use:   "add NAME CRON (-c COMMAND | --kind KIND [--payload JSON]) [flags]",
		Short: "Add a schedule that pushes a task at every slot of a cron expression",
		Long:  scheduleLong,
		Example: `  jobq sqlite://./work.db schedule add nightly-report '0 3 * * *' --tz Europe/Berlin -c './report.sh' -e OUT=/srv/reports
  jobq sqlite://./work.db schedule add hourly-sync @hourly --kind sync --payload '{"source": "crm"}' --missed once`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := f.task()
			if err != nil {
				return err
			}
			o := jobq.ScheduleOptions{TimeZone: f.tz, Missed: driver.MissedPolicy(f.missed), Paused: f.paused}
			return a.withQueue(cmd.Context(), func(q *jobq.Queue) error {
				spec, err := q.Admin().AddSchedule(cmd.Context(), args[0], args[1], t, o)
				if err != nil {
					return policyFailure(err)
				}
				zone := spec.TimeZone
				if zone == "" {
					zone = "UTC"
				}
				next := "paused"
				if st, err := findStatus(cmd.Context(), q, spec.Name); err == nil && !spec.Paused {
					next = "next run " + formatSlot(st.Next, spec.TimeZone)
				}
				fmt.Fprintf(a.stdout, "added schedule %s: %s (%s, missed runs: %s); %s\n", spec.Name, spec.Cron, zone, spec.Missed, next)
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.command, "command", "c", "", "the shell command each slot runs")
	fl.StringVar(&f.kind, "kind", "", "the kind of a Go task (worker.Mux routes on it), instead of -c")
	fl.StringVar(&f.payload, "payload", "", "the JSON object a Go task carries (with --kind; default {})")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "an environment variable for the command, K=V (repeatable, order kept)")
	fl.StringVar(&f.cwd, "cwd", "", "the command's working directory (default: the worker's)")
	countFlag(fl, &f.numRetries, "num-retries", "", 0, retriesRange, "how many times a failed run is retried before it is dead-lettered")
	fl.StringVar(&f.tz, "tz", "", "the IANA time zone the cron expression is read in, such as Europe/Berlin (default UTC)")
	fl.StringVar(&f.missed, "missed", string(driver.MissedSkip), "what to do about slots missed while no worker or scheduler ran: skip, or once (one catch-up run)")
	fl.BoolVar(&f.paused, "paused", false, "add the schedule paused ('schedule resume NAME' starts it)")
	return cmd
}

// task builds the scheduled task from the flags.
func (f scheduleFlags) task() (*jobq.Task, error) {
	switch {
	case f.command == "" && f.kind == "":
		return nil, usageError("schedule add needs a task: -c COMMAND for a shell command, or --kind KIND [--payload JSON] for a Go handler")
	case f.payload != "" && f.kind == "":
		return nil, usageError("--payload needs --kind: the kind names the Go handler that runs it")
	case f.command != "" && f.kind != "":
		return nil, usageError("give either -c COMMAND or --kind KIND [--payload JSON], not both")
	case f.kind != "" && (len(f.env) > 0 || f.cwd != ""):
		return nil, usageError("-e and --cwd are for shell commands (-c), not Go tasks (--kind)")
	}
	env, err := parseEnvFlags(f.env)
	if err != nil {
		return nil, err
	}
	t := &jobq.Task{Command: f.command, Env: env, Cwd: f.cwd, NumRetries: f.numRetries}
	if f.kind != "" {
		payload := f.payload
		if payload == "" {
			payload = "{}"
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(payload), &obj); err != nil || obj == nil {
			return nil, usageError("--payload %q is not a JSON object: write it as '{\"key\": \"value\"}'", payload)
		}
		t = &jobq.Task{Kind: f.kind, Payload: json.RawMessage(payload), NumRetries: f.numRetries}
	}
	return t, nil
}

func (a *app) scheduleListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the schedules: cron, zone, state, next run, last fired slot, task",
		Example: `  jobq sqlite://./work.db schedule list
  jobq sqlite://./work.db schedule list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.readQueue(cmd.Context(), func(q *jobq.Queue) error {
				list, err := q.Admin().Schedules(cmd.Context())
				if err != nil {
					return policyFailure(err)
				}
				if asJSON {
					return writeSchedulesJSON(a.stdout, list)
				}
				if len(list) == 0 {
					fmt.Fprintln(a.stdout, "no schedules (add one with 'schedule add NAME CRON -c COMMAND')")
					return nil
				}
				return printSchedules(a.stdout, list)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per schedule")
	return cmd
}

func (a *app) scheduleRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Short:   "Remove a schedule (tasks it already pushed stay queued)",
		Example: `  jobq sqlite://./work.db schedule rm nightly-report`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// rm may wait (up to 30 s) for a slot a scheduler claimed: Ctrl-C
			// stops the wait, and the error then says what was removed.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return a.withQueue(ctx, func(q *jobq.Queue) error {
				had, err := q.Admin().RemoveSchedule(ctx, args[0])
				if err != nil {
					return policyFailure(err)
				}
				if !had {
					return failure(fmt.Errorf("no schedule %q in this queue ('schedule list' lists them)", args[0]))
				}
				fmt.Fprintf(a.stdout, "removed schedule %s\n", args[0])
				return nil
			})
		},
	}
}

func (a *app) schedulePauseCommand(verb string) *cobra.Command {
	short, done := "Stop a schedule firing until 'schedule resume'", "paused schedule %s: it fires nothing until 'schedule resume %s'\n"
	if verb == "resume" {
		short, done = "Let a paused schedule fire again (slots passed while paused are not caught up)", "resumed schedule %s: it fires from its next slot (%s)\n"
	}
	return &cobra.Command{
		Use:     verb + " NAME",
		Short:   short,
		Example: "  jobq sqlite://./work.db schedule " + verb + " nightly-report",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withQueue(cmd.Context(), func(q *jobq.Queue) error {
				fn := q.Admin().PauseSchedule
				if verb == "resume" {
					fn = q.Admin().ResumeSchedule
				}
				// Pausing a paused schedule, or resuming an active one,
				// changes nothing: say so, as resume of a queue does.
				done := done
				if st, err := findStatus(cmd.Context(), q, args[0]); err == nil && st.Paused == (verb == "pause") {
					done = "schedule %s was not paused: it fires from its next slot (%s)\n"
					if verb == "pause" {
						done = "schedule %s was paused already: it fires nothing until 'schedule resume %s'\n"
					}
				}
				if err := fn(cmd.Context(), args[0]); err != nil {
					return policyFailure(err)
				}
				if verb == "pause" {
					fmt.Fprintf(a.stdout, done, args[0], args[0])
					return nil
				}
				next := "unknown"
				if st, err := findStatus(cmd.Context(), q, args[0]); err == nil {
					next = formatSlot(st.Next, st.TimeZone)
				}
				fmt.Fprintf(a.stdout, done, args[0], next)
				return nil
			})
		},
	}
}

func (a *app) schedulerCommand() *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "scheduler [--once]",
		Short: "Fire the queue's recurring schedules and release its held tasks (for queues without long-lived workers)",
		Long: `Fire due slots of the queue's schedules every 2 seconds until Ctrl-C or
SIGTERM, logging each slot it pushes, and release the held tasks whose
parents ended (tasks pushed with --after or --after-group, and groups'
steps), or cancel those with a parent that failed. Workers do this
already (unless --no-schedules), so run it only where no worker runs for
long, for example a queue whose workers are started on demand. Any number
of schedulers and workers may run at once: each slot is pushed once, each
held task released once. --once does it once and exits, for a system cron
job.`,
		Example: `  jobq sqlite://./work.db scheduler
  jobq sqlite://./work.db scheduler --once`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return a.withQueue(ctx, func(q *jobq.Queue) error {
				if once {
					return a.schedulerOnce(ctx, q)
				}
				a.log.Info("scheduler started: firing the queue's schedules; Ctrl-C stops it", "every", driver.ScheduleRefresh)
				if err := worker.RunScheduler(ctx, q, a.log); err != nil {
					return policyFailure(err)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "fire what is due now and exit")
	return cmd
}

// schedulerOnce is scheduler --once: fire what is due now and sweep the
// held tasks, where the backend keeps them.
func (a *app) schedulerOnce(ctx context.Context, q *jobq.Queue) error {
	caps := q.Capabilities()
	sweep := caps.Level(driver.Dependencies) != driver.Unsupported && caps.Level(driver.Results) != driver.Unsupported
	if caps.Level(driver.Schedules) != driver.Unsupported || !sweep {
		runs, err := q.Admin().FireSchedules(ctx, time.Now())
		for _, r := range runs {
			fmt.Fprintf(a.stdout, "fired %s slot %s: task %s%s\n", r.Name, r.Slot.UTC().Format(time.RFC3339), r.TaskID, dupNote(r))
		}
		if err != nil {
			return policyFailure(err)
		}
	}
	if !sweep {
		return nil
	}
	res, err := q.Admin().SweepHeld(ctx)
	for _, id := range res.Released {
		fmt.Fprintf(a.stdout, "released held task %s: its parents ended\n", id)
	}
	for _, id := range res.Cancelled {
		fmt.Fprintf(a.stdout, "cancelled held task %s: a parent did not succeed (to see which: %s)\n", id, a.commandHint("result "+id))
	}
	if err != nil {
		return failure(err)
	}
	return nil
}

func dupNote(r driver.ScheduleRun) string {
	switch {
	case r.Duplicate:
		return " (already queued: nothing new pushed)"
	case r.TakeOver:
		return " (taken over from a scheduler that stopped mid-fire)"
	}
	return ""
}

// findStatus returns the listing of one schedule.
func findStatus(ctx context.Context, q *jobq.Queue, name string) (driver.ScheduleStatus, error) {
	list, err := q.Admin().Schedules(ctx)
	if err != nil {
		return driver.ScheduleStatus{}, err
	}
	for _, s := range list {
		if s.Name == name {
			return s, nil
		}
	}
	return driver.ScheduleStatus{}, &jobq.Error{Code: errcode.NotFound, Msg: "no schedule " + name}
}

// formatSlot prints a slot in the schedule's zone, to the minute, or to
// the second for a slot within a minute (@every 5s): to the minute, a
// schedule's next run and last fired slot printed alike.
func formatSlot(t time.Time, tz string) string {
	if t.IsZero() {
		return "-"
	}
	loc := time.UTC
	if l, err := time.LoadLocation(tz); err == nil && tz != "" {
		loc = l
	}
	if t.Second() != 0 {
		return t.In(loc).Format("2006-01-02 15:04:05 MST")
	}
	return t.In(loc).Format("2006-01-02 15:04 MST")
}

// scheduledTask describes a schedule's task in one line.
func scheduledTask(s driver.ScheduleSpec) string {
	v, err := hooks.UnmarshalTask(s.Task)
	if err != nil {
		return "(undecodable task)"
	}
	t := v.(*jobq.Task)
	if t.IsShell() {
		return t.Command
	}
	return "kind " + t.Kind + " " + string(t.Payload)
}

func printSchedules(w io.Writer, list []driver.ScheduleStatus) error {
	t := newTable(w, "NAME", "CRON", "ZONE", "MISSED", "STATE", "NEXT RUN", "LAST FIRED", "TASK")
	for _, s := range list {
		state := "active"
		if s.Paused {
			state = "paused"
		}
		last := formatSlot(s.LastFired, s.TimeZone)
		if s.Pending {
			last += " (pushing)"
		}
		zone := s.TimeZone
		if zone == "" {
			zone = "UTC"
		}
		t.row(s.Name, s.Cron, zone, s.Missed, state, formatSlot(s.Next, s.TimeZone), last, oneLine(scheduledTask(s.ScheduleSpec)))
	}
	return t.flush()
}

// scheduleJSON is a schedule as `schedule list --json` prints it.
type scheduleJSON struct {
	Name      string     `json:"name"`
	Cron      string     `json:"cron"`
	TimeZone  string     `json:"tz"`
	Missed    string     `json:"missed"`
	Paused    bool       `json:"paused"`
	Next      *time.Time `json:"next"`       // null: no next slot
	LastFired *time.Time `json:"last_fired"` // null: never fired
	Pending   bool       `json:"pending"`
	Task      string     `json:"task"`
}

func writeSchedulesJSON(w io.Writer, list []driver.ScheduleStatus) error {
	enc := json.NewEncoder(w)
	for _, s := range list {
		tz := s.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		out := scheduleJSON{Name: s.Name, Cron: s.Cron, TimeZone: tz, Missed: string(s.Missed), Paused: s.Paused, Pending: s.Pending, Task: scheduledTask(s.ScheduleSpec)}
		if !s.Next.IsZero() {
			n := s.Next.UTC()
			out.Next = &n
		}
		if !s.LastFired.IsZero() {
			l := s.LastFired.UTC()
			out.LastFired = &l
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}
