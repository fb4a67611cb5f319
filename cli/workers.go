package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
)

const workersLong = `List the queue's workers from the worker registry: the live ones and the
ones that vanished without withdrawing (killed with SIGKILL, their machine
preempted or cut off), with host, process ID, uptime, the tasks they run,
their CPU and memory use and their last heartbeat.

Every worker announces itself when it starts, writes its record again
every --registry-interval (10s by default) and withdraws when it exits, also
after an error or a SIGTERM/SIGINT. A worker that has not written its record
for three of its intervals (30s by default; --ttl sets another time) is
listed as vanished. Records are kept for 24 hours after their last heartbeat;
--all also lists the workers that withdrew in that time.

CPU is the share of one core the worker and the tasks it started used over
its last interval (100% is one core busy; 0 under a second), with their total CPU time; MEM is
their resident memory. Both are measured on Linux only. Times come from each
worker's own clock: a worker whose clock runs behind may show as vanished.

Backends without the worker-registry feature keep no records (see
` + "`jobq backends`" + `); the command then says so and exits 2. No workers
to list is not an error: it says so and exits 0.

A second table sums the listed workers per environment label (worker
--env-label: the cloud VM size and region, or the host), and for the queue
(all): tasks done and failed, preemptions, work done (the time tasks ran),
work lost (attempts stopped by a preemption or a signal, since their last
checkpoint) and work saved by checkpoints (docs/checkpoints.md). Add --all
to count the workers that exited in the last 24 hours, as preempted ones
do.

--json prints an array of objects: id, state (live, vanished, withdrawn),
host, pid, version, env, started, heartbeat (RFC 3339), uptime_s,
heartbeat_age_s, interval_s, tasks (IDs), done, failed, cpu_percent,
cpu_seconds, rss_bytes, preemptions, work_s, lost_s, saved_s.`

func (a *app) workersCommand() *cobra.Command {
	var (
		asJSON, all bool
		ttl         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "workers [--json] [--all] [--ttl D]",
		Short: "List live workers and those that vanished without withdrawing",
		Long:  workersLong,
		Example: `  jobq sqlite://./work.db workers
  jobq 'redis://localhost:6379/0?queue=work' workers --all --json
  jobq sqlite://./work.db workers --ttl 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			q, err := a.openReadOnly(ctx)
			if err != nil {
				return err
			}
			defer q.Close()
			ws, err := q.Admin().Workers(ctx, jobq.WorkersOptions{TTL: ttl, Withdrawn: all})
			if err != nil {
				return featureFailure(err)
			}
			if asJSON {
				return printWorkersJSON(a.stdout, ws, time.Now())
			}
			if pols, err := q.Admin().Policies(ctx); err == nil {
				// A backend without policies has no pauses to show.
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				printPauses(tw, pols)
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if err := printWorkers(a.stdout, ws, time.Now()); err != nil {
				return err
			}
			return printWorkTotals(a.stdout, ws)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "also list the workers that withdrew (exited cleanly) in the last 24 hours")
	cmd.Flags().Var(durationFlag(&ttl), "ttl", "how long a worker may go without a heartbeat before it counts as vanished (default: three of its heartbeat intervals)")
	return cmd
}

// workerJSON is one worker in `workers --json`.
type workerJSON struct {
	ID           string    `json:"id"`
	State        string    `json:"state"`
	Host         string    `json:"host"`
	PID          int       `json:"pid"`
	Version      string    `json:"version"`
	Started      time.Time `json:"started"`
	Heartbeat    time.Time `json:"heartbeat"`
	UptimeS      float64   `json:"uptime_s"`
	HeartbeatAge float64   `json:"heartbeat_age_s"`
	IntervalS    float64   `json:"interval_s"`
	Tasks        []string  `json:"tasks"`
	Done         int64     `json:"done"`
	Failed       int64     `json:"failed"`
	CPUPercent   float64   `json:"cpu_percent"`
	CPUSeconds   float64   `json:"cpu_seconds"`
	RSSBytes     int64     `json:"rss_bytes"`
	Env          string    `json:"env"`
	Preemptions  int64     `json:"preemptions"`
	WorkS        float64   `json:"work_s"`
	LostS        float64   `json:"lost_s"`
	SavedS       float64   `json:"saved_s"`
}

func printWorkersJSON(out io.Writer, ws []*jobq.WorkerInfo, now time.Time) error {
	list := make([]workerJSON, len(ws))
	for i, w := range ws {
		tasks := w.Tasks
		if tasks == nil {
			tasks = []string{}
		}
		list[i] = workerJSON{ID: w.ID, State: string(w.State), Host: w.Host, PID: w.PID, Version: w.Version,
			Started: w.Started, Heartbeat: w.Heartbeat, UptimeS: w.Uptime().Seconds(),
			HeartbeatAge: now.Sub(w.Heartbeat).Seconds(), IntervalS: w.Interval.Seconds(), Tasks: tasks,
			Done: w.Done, Failed: w.Failed, CPUPercent: w.CPUPercent, CPUSeconds: w.CPUSeconds, RSSBytes: w.RSSBytes,
			Env: w.Env, Preemptions: w.Preemptions, WorkS: w.WorkSeconds, LostS: w.LostSeconds, SavedS: w.SavedSeconds}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(list)
}

func printWorkers(out io.Writer, ws []*jobq.WorkerInfo, now time.Time) error {
	if len(ws) == 0 {
		_, err := fmt.Fprintln(out, "(no live or vanished workers)")
		return err
	}
	t := newTable(out, "WORKER", "STATE", "HOST", "PID", "UPTIME", "TASKS", "DONE", "FAILED", "CPU", "MEM", "LAST HEARTBEAT")
	for _, w := range ws {
		t.row(w.ID, w.State, w.Host, w.PID,
			roundDuration(w.Uptime()), taskList(w.Tasks), w.Done, w.Failed,
			fmt.Sprintf("%.0f%% (%s)", w.CPUPercent, roundDuration(time.Duration(w.CPUSeconds*float64(time.Second)))),
			humanBytes(w.RSSBytes), roundDuration(now.Sub(w.Heartbeat))+" ago")
	}
	return t.flush()
}

// roundDuration shows d to the second (to the tenth under a minute).
func roundDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// taskList shows how many tasks run and the first IDs, shortened.
func taskList(ids []string) string {
	short := make([]string, len(ids))
	for i, id := range ids {
		short[i] = truncate(id, 12)
	}
	ids = short
	switch len(ids) {
	case 0:
		return "0"
	case 1, 2:
		return fmt.Sprintf("%d (%s)", len(ids), strings.Join(ids, ", "))
	}
	return fmt.Sprintf("%d (%s, ...)", len(ids), strings.Join(ids[:2], ", "))
}

// humanBytes shows n in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
