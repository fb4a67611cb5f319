package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/bound"
	"github.com/jobq/jobq/internal/dashboard"
	"github.com/jobq/jobq/internal/hooks"
)

func (a *app) dashboardCommand() *cobra.Command {
	var addr, token string
	var interval time.Duration
	var history int
	cmd := &cobra.Command{
		Use:   "dashboard [--addr HOST:PORT] [--token T]",
		Short: "Serve a web dashboard of the queue: depth, throughput, history, runtimes, workers, dead letters, policies",
		Long: `Serve a web page that shows the queue: its counts over time, throughput and
dead-letter rate, task runtimes, workers (where the backend keeps a worker
registry), dead letters with their attempt history and output tail (with
requeue and purge buttons that ask first), and per-key policies. The page
and its scripts are built into jobq; it works offline.

The dashboard reads the counts every --interval and keeps the last
--history samples in memory, so the Overview's plots start when it starts.
The History and Fleet sections come from the queue's result records and
worker registry, so they show the last 6 hours, 24 hours or 7 days even
when the dashboard was not running: tasks ended, runtimes, preempted and
other interrupted attempts (by environment), errors grouped by exit code
and first output line, worker churn, lifetimes, CPU and memory
(docs/dashboard.md; where the backend cannot add records up, History says
so).
GET /api/stats serves the 'stats --json' document, for autoscalers such as
KEDA's metrics-api scaler (docs/autoscaling.md).

It listens on 127.0.0.1 by default. Any other address needs --token (or
$JOBQ_DASHBOARD_TOKEN), which every request must carry: open
http://HOST:PORT/?token=TOKEN once (the page keeps it in a cookie), or
send "Authorization: Bearer TOKEN".`,
		Example: `  jobq sqlite://./work.db dashboard
  jobq 'postgres://app@db/jobs?queue=render' dashboard --addr 127.0.0.1:9000
  jobq redis://cache:6379 dashboard --addr 0.0.0.0:8080   # with $JOBQ_DASHBOARD_TOKEN set`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token == "" {
				token = strings.TrimSpace(os.Getenv("JOBQ_DASHBOARD_TOKEN"))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			q, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer q.Close()
			srv, err := dashboard.New(dashboard.Config{Queue: q, Addr: addr, Token: token, Interval: interval,
				History: history, Workers: workerSource(q), Logger: a.log})
			if err != nil {
				return asUsage(err)
			}
			ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
			if err != nil {
				return failure(fmt.Errorf("jobq dashboard: cannot listen on %s: %w (is another process using the port? pick another with --addr)", addr, err))
			}
			fmt.Fprintf(a.stdout, "jobq dashboard for %s on http://%s/\n", queueLabel(q), ln.Addr())
			if err := srv.Serve(ctx, ln); err != nil {
				return failure(err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address, HOST:PORT; a non-loopback host needs --token (port 0 picks a free one)")
	cmd.Flags().StringVar(&token, "token", "", "token every request must carry (default $JOBQ_DASHBOARD_TOKEN); required off loopback")
	durationRangeFlag(cmd.Flags(), &interval, "interval", dashboard.DefaultInterval, bound.Durations{Min: 100 * time.Millisecond}, "how often to read the queue's counts")
	countFlag(cmd.Flags(), &history, "history", "", dashboard.DefaultHistory, bound.Ints{Min: 2, Max: 1_000_000}, "how many samples to keep in memory (the plots' window is history × interval)")
	return cmd
}

// queueLabel names the queue for messages: its redacted URL, or its name.
func queueLabel(q *jobq.Queue) string {
	if u := hooks.URL(q); u != "" {
		return u
	}
	return q.Name()
}

// workerSource is the dashboard's view of the queue's worker registry:
// live, vanished and recently withdrawn workers. On a backend without a
// registry Admin.Workers fails with Unimplemented, which the page shows as
// "not available on this backend".
func workerSource(q *jobq.Queue) dashboard.WorkerSource {
	return func(ctx context.Context) ([]dashboard.Worker, error) {
		ws, err := q.Admin().Workers(ctx, jobq.WorkersOptions{Withdrawn: true})
		if err != nil {
			return nil, err
		}
		out := make([]dashboard.Worker, len(ws))
		for i, w := range ws {
			out[i] = dashboard.Worker{ID: w.ID, Host: w.Host, PID: w.PID, Version: w.Version, State: string(w.State),
				Started: w.Started, Heartbeat: w.Heartbeat, Tasks: w.Tasks, Done: w.Done, Failed: w.Failed,
				CPUPercent: w.CPUPercent, RSSBytes: w.RSSBytes}
		}
		return out, nil
	}
}
