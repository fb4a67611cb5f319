package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bound"
	"github.com/jobq/jobq/internal/endreason"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/worker"
	"github.com/jobq/jobq/worker/preempt"
)

type workerFlags struct {
	noSchedules    bool
	noRollups      bool
	concurrency    int
	visibility     time.Duration
	heartbeat      bool
	noHeartbeat    bool
	maxConsecutive int
	maxLostLeases  int
	timeLimit      time.Duration
	taskTimeLimit  time.Duration
	wait           bool
	maxPoll        time.Duration // --max-poll: the longest idle receive wait with --wait
	killTimeout    time.Duration
	snoozeDelay    time.Duration
	emulateTTY     bool
	statusInterval time.Duration
	failBase       time.Duration
	failMax        time.Duration
	prefetch       int // as worker.Options.Prefetch: 0 the default (four times --num-workers), -1 none
	preemption     string
	metadata       string // the metadata service's base URL
	passEnv        []string
	registryEvery  time.Duration // the worker registry's heartbeat (workers.go); 0: off
	metricsAddr    string        // --metrics-addr: serve Prometheus metrics there
	metricsPublic  bool          // --metrics-public: allow a non-loopback --metrics-addr
	checkpoints    bool          // --checkpoints
	ckptEvery      time.Duration // --checkpoint-every
	ckptMaxMB      int64         // --checkpoint-max-mb
	envLabel       string        // --env-label
}

// ExitPreempted is the worker's exit status when a preemption notice
// stopped it (--preemption): the machine is going away, and the tasks that
// were running have been requeued.
const ExitPreempted = 3

// ExitPutBack is pull's exit status when its task did not end: it was put
// back to run again later (it snoozed, or a signal stopped it) or its lease
// was lost. It is EX_TEMPFAIL, the status with which a task snoozes.
const ExitPutBack = worker.ExitSnooze

const workerLong = `Run tasks from the queue until it is empty, then exit 0 (--wait keeps
polling instead).

Each task runs as 'bash -c CMD' in its own process group, with the worker's
environment less its own settings and credentials (JOBQ_*, AZURE_*, AWS_*,
PG*, REDIS*, ...; --pass-env NAME gives one back), plus the task's -e
variables, JOBQ_TASK_ID and JOBQ_QUEUE_NAME;
its output is logged line by line, prefixed with the task ID. A non-zero
exit is a failure: the task is retried while its --num-retries budget lasts,
then moved to the dead letters with the tail of its output.

Leases: each task is hidden from other workers for --visibility-timeout;
the heartbeat renews it every half timeout. A task whose lease is lost is
stopped and not counted as a failure. A worker that dies leaves its tasks to
reappear after the timeout.

The worker stops with exit 1 when more than --max-consecutive-failures
task attempts fail in a row (a retry is an attempt). With --failure-backoff B, it also pauses after each
failure in a row before taking more work: B after the first, doubling up
to --failure-backoff-max; a success resets it. It also stops with exit 1
when the queue refuses its credentials a claim or a completion.

Queue policies (jobq QUEUE policy ...): on backends that enforce them
natively a capped or rate-limited task is simply not handed out; on
backends that declare them emulated (Azure Storage Queue, Service Bus) this
worker enforces them for its own process and puts a blocked task back for
a second or so, without using a retry.

An empty queue: the worker exits when no task is ready and no delayed task
is waiting that it could run (tasks it put back itself because their gate
failed here do not count). Tasks running on other workers do not keep it.

Signals: SIGTERM or SIGINT stops taking tasks, sends SIGTERM to the running
tasks, requeues each (visible again at once) as soon as its process group
has exited, and exits; SIGUSR1 lets running tasks finish and
takes no new ones; a second signal sends SIGKILL to the running tasks.
--time-limit acts as SIGTERM when reached. The worker exits within
--kill-timeout of a SIGTERM even when the engine refuses writes (a full
disk): tasks still running shortly before it get SIGKILL, and requeues
not written by then are given up, their tasks named in the log; those
tasks are delivered again when their leases expire.

Snooze: a task that exits with status 75 ("not yet", EX_TEMPFAIL) is
requeued to run again after --snooze-delay, without spending a retry and
without counting as a failure; its attempt history says snoozed.

Task time limit: --task-time-limit (or a task's own push --time-limit,
which wins) stops an attempt that runs longer — SIGTERM, then SIGKILL
after --kill-timeout — and counts it as a failure, retried while the
task's retries last.

Results: where the backend keeps result records (jobq backends, results),
the worker records each task's end — exit code, output tail, attempts —
for 'jobq QUEUE result' and 'wait'; it stops a running task whose cancel was
requested ('jobq QUEUE cancel', checked every 5s) without retrying it; and
it purges expired records about every 10 minutes.

Retries: a failed task comes back after a delay that doubles per failure,
with jitter (push --retry-backoff, else the queue's retry-backoff policy,
else 10s up to 10m); meanwhile it counts as delayed.

Gates (push --gate-cmd): the gate command runs before the task, once per
worker (results cached by the command's SHA-256); a failed gate puts the
task back with a delay, without using a retry. Environment:
  JOBQ_GATE_CACHE_SIZE          cached gate results (default 128)
  JOBQ_GATE_TIMEOUT_S           seconds a gate may run (default 60)
  JOBQ_GATE_REQUEUE_DELAY_S     seconds a task waits after its gate failed (default 30)
  JOBQ_GATE_MAX_NOT_QUALIFIED   gate failures in a row after which the worker
                                exits 0: it cannot run anything here (default 100)

Prefetch: while tasks finish fast (under 50ms on average), the worker claims
up to --prefetch tasks beyond its free slots, so that the next claim's round
trip overlaps the running tasks; a waiting task's lease is renewed, and one
not started when the worker stops is requeued at once. Slower tasks turn it
off by themselves, so long tasks are never held back from other workers.

Spot VMs (--preemption): the worker watches the cloud's instance metadata
for notice of an eviction: Azure's Scheduled Events (a Preempt or Terminate
event for this VM) or Google Cloud's preempted flag. On a notice it takes no
new tasks, stops the running ones as SIGTERM does (SIGKILL 10s before the
eviction's deadline), requeues them without using a retry, approves the
event (Azure) and exits 3. The default, auto, reads the machine's firmware
data (no network call) and watches only on an Azure or Google Cloud VM.
$JOBQ_METADATA_ENDPOINT or --metadata-endpoint replace the metadata
service's address http://169.254.169.254.

Checkpoints (--checkpoints, --checkpoint-every D; they need --stash): each
task gets $JOBQ_CHECKPOINT_DIR, saved to the stash before the task is
stopped (preemption, SIGTERM, time limits), every D when it changed, and
when the task creates $JOBQ_CHECKPOINT_DIR/.jobq-save (the worker removes it
once saved). The next attempt, on any worker, finds the directory restored;
the checkpoint is deleted when the task ends. --env-label names this
worker's environment (default: the VM size and region on Azure and Google
Cloud, else the host) in heartbeats and records; 'workers --all' sums work
done, lost to preemptions and saved by checkpoints per environment. See
docs/checkpoints.md.

Disk full: when the engine refuses to record a finished task (disk full,
out of memory, unreachable), the worker takes no new tasks and retries the
settlement with backoff, logging once when it pauses and once when it
resumes.

A status line (tasks done, failures, the rate; every minute also the queue's
size and when it should drain) is logged every --status-interval while
tasks end, and every 5 minutes while none do.

Metrics and traces: --metrics-addr 127.0.0.1:9464 serves Prometheus metrics
(tasks done, failed, dead-lettered and requeued, run times, queue wait,
leases, queue depth) at /metrics, on loopback unless --metrics-public.
OTEL_EXPORTER_OTLP_ENDPOINT (and the other standard OTEL_* variables) sends
OpenTelemetry traces and metrics over OTLP/HTTP; see docs/observability.md.`

func (a *app) workerCommand() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker [flags]",
		Short: "Run tasks until the queue is empty",
		Long:  workerLong,
		Example: `  jobq sqlite://./work.db worker
  jobq sqlite://./work.db worker -n 8 --visibility-timeout 30m --time-limit 12h
  jobq sqlite://./work.db worker --task-time-limit 2h
  jobq sqlite://./work.db worker --wait --max-consecutive-failures 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.fromEnv(cmd); err != nil {
				return err
			}
			return a.runWorker(cmd.Context(), f, 0)
		},
	}
	fl := cmd.Flags()
	countFlag(fl, &f.concurrency, "num-workers", "n", 1, countRange, "how many tasks run at once (on Postgres the connection pool holds this many plus one, 2 to 10, unless the URL sets pool_max_conns)")
	f.addCommon(cmd)
	countFlag(fl, &f.maxConsecutive, "max-consecutive-failures", "", 2, maxConsecutiveRange, "stop with exit 1 when more task attempts than this fail in a row (-1: never)")
	countFlag(fl, &f.maxLostLeases, "max-lost-leases", "", worker.DefaultMaxLostLeases, maxLostLeasesRange,
		"dead-letter a task whose lease expired on this many deliveries in a row (it kills or hangs its worker, or outlasts its lease; -1: never)")
	fl.Var(durationFlag(&f.failBase), "failure-backoff", "pause this long after a failure, doubling with each failure in a row (0: no pause)")
	f.failMax = 5 * time.Minute
	fl.Var(durationFlag(&f.failMax), "failure-backoff-max", "the longest --failure-backoff pause")
	f.timeLimit = 24 * time.Hour
	fl.Var(durationFlag(&f.timeLimit), "time-limit", "stop (as SIGTERM does) after running this long; $JOBQ_TIME_LIMIT (0: no limit)")
	fl.BoolVar(&f.wait, "wait", false, "keep polling an empty queue instead of exiting")
	fl.BoolVar(&f.noSchedules, "no-schedules", false, "do not fire the queue's recurring schedules nor release its held tasks (by default every worker does both, each slot and held task once in all; see 'schedule --help' and 'group --help')")
	fl.BoolVar(&f.noRollups, "no-history-rollups", false, "do not roll up the queue's result records when each 10-minute slot ends (by default one worker of the queue does, so that the dashboard's history opens at once; see docs/dashboard.md)")
	f.maxPoll = worker.DefaultMaxPoll
	fl.Var(durationFlag(&f.maxPoll), "max-poll", "with --wait, the longest an idle worker waits between looks at an empty queue: the wait doubles from 1s up to this, and a task resets it (0: no growth)")
	f.statusInterval = 10 * time.Second
	fl.Var(durationFlag(&f.statusInterval), "status-interval", "how often to log a status line while tasks end (every 5m while none do; 0: never)")
	countFlag(fl, &f.prefetch, "prefetch", "", 0, prefetchRange, "tasks claimed ahead of free slots while tasks are fast (default: four times --num-workers; 0: none)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`HOST:PORT`/metrics, such as 127.0.0.1:9464 (loopback only unless --metrics-public)")
	fl.BoolVar(&f.metricsPublic, "metrics-public", false, "allow --metrics-addr on a non-loopback address (the endpoint has no authentication)")
	return cmd
}

func (a *app) pullCommand() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "pull [flags]",
		Short: "Run exactly one task, then exit",
		Long: `Take one task from the queue, run it as the worker does, and exit: 0 when it
succeeded or the queue was empty, 1 when it failed (it is then retried or
dead-lettered as the worker would), 3 when a preemption notice stopped it,
75 when it did not end: it snoozed (exited 75) or a signal stopped it, and
it was put back to run again later.`,
		Example: `  jobq sqlite://./work.db pull`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.concurrency = 1
			f.prefetch = -1
			f.maxConsecutive = -1
			f.statusInterval = 0
			if err := f.fromEnv(cmd); err != nil {
				return err
			}
			return a.runWorker(cmd.Context(), f, 1)
		},
	}
	f.addCommon(cmd)
	return cmd
}

// addCommon adds the flags worker and pull share.
func (f *workerFlags) addCommon(cmd *cobra.Command) {
	fl := cmd.Flags()
	durationRangeFlag(fl, &f.visibility, "visibility-timeout", 10*time.Minute, visibilityRange, "how long a running task stays hidden from other workers (the lease)")
	fl.BoolVar(&f.heartbeat, "heartbeat", true, "renew the lease every half --visibility-timeout while a task runs")
	fl.BoolVar(&f.noHeartbeat, "no-heartbeat", false, "do not renew leases: a task running past --visibility-timeout is stopped")
	durationRangeFlag(fl, &f.killTimeout, "kill-timeout", 600*time.Second, killTimeoutRange, "how long a stopped task has between SIGTERM and SIGKILL, and the most a stop takes; $JOBQ_KILL_TIMEOUT")
	durationRangeFlag(fl, &f.snoozeDelay, "snooze-delay", time.Minute, snoozeDelayRange, "how long a task that exits with status 75 (snoozes: 'not yet') waits before it is delivered again, without spending a retry")
	durationRangeFlag(fl, &f.taskTimeLimit, "task-time-limit", 0, taskTimeLimitRange, "stop a task attempt that runs longer than this (SIGTERM, then SIGKILL after --kill-timeout) and count it as a failure; a task's push --time-limit wins; $JOBQ_TASK_TIME_LIMIT (0: no limit)")
	fl.BoolVarP(&f.emulateTTY, "emulate-tty", "t", false, "run tasks under a pseudo-terminal so their output is line-buffered (stdout and stderr merge)")
	fl.StringVar(&f.preemption, "preemption", preempt.Auto, "`mode` for spot-VM eviction notices: auto (watch on Azure or Google Cloud VMs), azure, gcp or off")
	fl.StringVar(&f.metadata, "metadata-endpoint", "", "the instance metadata service's base `URL` for --preemption; $JOBQ_METADATA_ENDPOINT (default "+preempt.DefaultEndpoint+")")
	f.registryEvery = driver.DefaultWorkerHeartbeat
	fl.Var(durationFlag(&f.registryEvery), "registry-interval", "how often the worker writes its record (tasks, CPU, memory) for the workers command (0: never)")
	fl.BoolVar(&f.checkpoints, "checkpoints", false, "give each task $JOBQ_CHECKPOINT_DIR, saved to the stash when the task is stopped (preemption, SIGTERM, time limit) or writes $JOBQ_CHECKPOINT_DIR/.jobq-save, and restored for its next attempt on any worker; needs --stash (docs/checkpoints.md)")
	fl.Var(durationFlag(&f.ckptEvery), "checkpoint-every", "also save a running task's checkpoint directory this often when it changed; implies --checkpoints (0: only at stops and on request)")
	fl.Int64Var(&f.ckptMaxMB, "checkpoint-max-mb", worker.DefaultCheckpointMaxBytes>>20, "the largest checkpoint in `MiB`; a larger one is not saved (the previous is kept) and a warning is logged")
	fl.StringVar(&f.envLabel, "env-label", "", "the worker's environment `label` in heartbeats, attempts and result records, for counting preemptions and lost work per environment (default: the cloud VM size and region from the metadata service on Azure and Google Cloud VMs, else the host name)")
	fl.StringArrayVar(&f.passEnv, "pass-env", nil, "give tasks and gates the worker's `NAME` although it is withheld (JOBQ_*, AZURE_*, AWS_*, PG*, REDIS*, ...); a name or PREFIX* (repeatable; see docs/security.md)")
}

// fromEnv applies $JOBQ_TIME_LIMIT and $JOBQ_KILL_TIMEOUT to flags not given.
func (f *workerFlags) fromEnv(cmd *cobra.Command) error {
	for _, e := range []struct {
		flag, env string
		dst       *time.Duration
		r         bound.Durations
	}{
		{"time-limit", "JOBQ_TIME_LIMIT", &f.timeLimit, bound.NonNegative},
		{"kill-timeout", "JOBQ_KILL_TIMEOUT", &f.killTimeout, killTimeoutRange},
		{"task-time-limit", "JOBQ_TASK_TIME_LIMIT", &f.taskTimeLimit, bound.NonNegative},
	} {
		fl := cmd.Flags().Lookup(e.flag)
		if fl == nil || fl.Changed {
			continue
		}
		if v := os.Getenv(e.env); v != "" {
			d, err := e.r.Parse("$"+e.env, v)
			if err != nil {
				return asUsage(err)
			}
			*e.dst = d
		}
	}
	if f.noHeartbeat && f.heartbeat && cmd.Flags().Changed("heartbeat") {
		return usageError("--heartbeat and --no-heartbeat contradict each other; give one")
	}
	if f.noHeartbeat {
		f.heartbeat = false
	}
	if f.metricsAddr != "" {
		if err := checkMetricsAddr(f.metricsAddr, f.metricsPublic); err != nil {
			return err
		}
	}
	if err := f.checkPreemption(cmd); err != nil {
		return err
	}
	if err := worker.CheckPassEnv(f.passEnv); err != nil {
		return usageError("--pass-env: %v", err)
	}
	if f.concurrency < 1 {
		return usageError("--num-workers is %d; it must be at least 1", f.concurrency)
	}
	if f.visibility < time.Second {
		return usageError("--visibility-timeout %v is too short; use at least 1s", f.visibility)
	}
	if fl := cmd.Flags().Lookup("prefetch"); fl != nil && fl.Changed {
		if err := f.setPrefetch(f.prefetch); err != nil {
			return err
		}
	}
	return f.checkLimits(cmd)
}

// checkLimits refuses a zero --max-lost-leases and a zero or too negative
// --max-consecutive-failures (-1 is no limit).
func (f *workerFlags) checkLimits(cmd *cobra.Command) error {
	if fl := cmd.Flags().Lookup("max-lost-leases"); fl != nil && fl.Changed && f.maxLostLeases == 0 {
		return usageError("--max-lost-leases is 0; use 1 or more (a task whose lease expired on this many deliveries in a row is dead-lettered), or -1 for no limit")
	}
	if f.maxConsecutive == 0 || f.maxConsecutive < -1 {
		return usageError("--max-consecutive-failures is %d; use 1 or more (the worker stops when more task attempts than this fail in a row), or -1 for no limit", f.maxConsecutive)
	}
	return nil
}

// runWorker runs the shell worker; maxTasks 1 is pull.
func (a *app) runWorker(ctx context.Context, f workerFlags, maxTasks int) error {
	gate, err := checkWorkerEnv(f)
	if err != nil {
		return err
	}
	if f.metricsAddr != "" {
		a.metricsReader = sdkmetric.NewManualReader()
	}
	q, err := a.openWorker(ctx, f.concurrency)
	if err != nil {
		return err
	}
	defer q.Close()
	if f.metricsAddr != "" {
		ms, err := serveMetrics(f.metricsAddr, a.metricsReader, a.log)
		if err != nil {
			return err
		}
		defer ms.stop()
	}

	opts, mode, err := a.workerOptions(f, maxTasks, gate)
	if err != nil {
		return err
	}
	if (opts.Checkpoints || opts.CheckpointEvery > 0) && hooks.Stash(q) == nil {
		return usageError("--checkpoints and --checkpoint-every need a stash to keep checkpoints in: give --stash file:///shared/dir, gs://bucket/prefix or azblob://account/container/prefix ($JOBQ_STASH, or stash= in the queue URL); see docs/checkpoints.md")
	}
	shell := &worker.Shell{Env: a.baseEnv, PassEnv: f.passEnv, KillTimeout: f.killTimeout, EmulateTTY: f.emulateTTY, SnoozeDelay: f.snoozeDelay}
	w := worker.New(q, shell, opts)
	defer a.forwardSignals(w, f.killTimeout)()
	var settled <-chan worker.Event
	if maxTasks == 1 {
		// pull tells a task whose settlement was not stored from none.
		evs, stop := w.Subscribe(4)
		defer stop()
		settled = evs
	}

	a.log.Info("worker starting", "queue", hooks.URL(q), "num_workers", f.concurrency, "visibility_timeout", formatDuration(f.visibility),
		"time_limit", formatDuration(f.timeLimit), "task_time_limit", formatDuration(f.taskTimeLimit), "heartbeat", f.heartbeat, "preemption", mode, "env_label", opts.EnvLabel, "checkpoints", opts.Checkpoints || opts.CheckpointEvery > 0, "pid", os.Getpid())
	if err := workerExit(w.Run(ctx)); err != nil {
		return err
	}
	if maxTasks == 1 {
		return a.pullResult(w.Counts(), lastEvent(settled), w.EndReason())
	}
	return nil
}

// lastEvent returns the last event evs holds, nil when it holds none.
func lastEvent(evs <-chan worker.Event) *worker.Event {
	var last *worker.Event
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				return last
			}
			last = &ev
		default:
			return last
		}
	}
}

// checkWorkerEnv reads the gate settings from the environment and checks
// that tasks can run here (Shell.Check), and script for --emulate-tty.
// Without bash every task claimed would fail, and be dead-lettered once its
// retries were spent, for the worker's fault.
func checkWorkerEnv(f workerFlags) (worker.GateConfig, error) {
	gate, err := worker.GateConfigFromEnv(os.LookupEnv)
	if err != nil {
		return gate, asUsage(fmt.Errorf("invalid gate settings: %w", err))
	}
	if err := worker.NewShell().Check(); err != nil {
		return gate, asUsage(err)
	}
	if f.emulateTTY {
		if _, err := exec.LookPath("script"); err != nil {
			return gate, usageError("--emulate-tty needs the script command (util-linux), which is not on PATH")
		}
	}
	return gate, nil
}

// workerOptions turns the flags into worker options, with the preemption
// watcher for the mode in effect (--preemption auto detects it), which it
// also returns.
func (a *app) workerOptions(f workerFlags, maxTasks int, gate worker.GateConfig) (worker.Options, string, error) {
	opts := worker.Options{
		Concurrency:            f.concurrency,
		Prefetch:               f.prefetch,
		Visibility:             f.visibility,
		DisableHeartbeat:       !f.heartbeat,
		MaxConsecutiveFailures: f.maxConsecutive,
		MaxLostLeases:          f.maxLostLeases,
		FailureBackoff:         worker.FailureBackoff{Base: f.failBase, Max: f.failMax},
		TimeLimit:              f.timeLimit,
		StopTimeout:            f.killTimeout,
		TaskTimeLimit:          f.taskTimeLimit,
		Wait:                   f.wait,
		NoSchedules:            f.noSchedules || maxTasks > 0,
		NoHistoryRollups:       f.noRollups,
		MaxPoll:                f.maxPoll,
		MaxTasks:               maxTasks,
		StatusInterval:         f.statusInterval,
		Gate:                   gate,
		PassEnv:                f.passEnv,
		Logger:                 a.log,
		TaskLogLevel:           slog.LevelInfo, // the CLI logs every task's start and end
		HeartbeatInterval:      f.registryEvery,
		Version:                version(),
	}
	if f.statusInterval == 0 {
		opts.StatusInterval = -1
	}
	if f.maxPoll == 0 {
		opts.MaxPoll = -1 // no growth: every receive waits Poll
	}
	if f.registryEvery == 0 {
		opts.HeartbeatInterval = -1
	}
	if f.ckptMaxMB < 1 {
		return opts, "", usageError("--checkpoint-max-mb is %d; use 1 or more", f.ckptMaxMB)
	}
	opts.Checkpoints, opts.CheckpointEvery, opts.CheckpointMaxBytes = f.checkpoints, f.ckptEvery, f.ckptMaxMB<<20
	mode := f.preemption
	if mode == preempt.Auto {
		mode = preempt.Detect()
	}
	var err error
	cfg := preempt.Config{Endpoint: f.metadata, Logger: a.log}
	if opts.Preemption, err = preempt.New(mode, cfg); err != nil {
		return opts, mode, asUsage(err)
	}
	opts.EnvLabel = f.envLabel
	if opts.EnvLabel == "" && mode != preempt.Off {
		label, err := preempt.EnvLabel(context.Background(), mode, cfg)
		if err != nil {
			a.log.Warn("could not read the VM size and region for the environment label; using the host name (set --env-label)", "error", err)
		}
		opts.EnvLabel = label
	}
	if opts.EnvLabel == "" {
		opts.EnvLabel, _ = os.Hostname()
	}
	return opts, mode, nil
}

// forwardSignals turns SIGTERM and SIGINT into w.Stop (which ends within
// killTimeout), SIGUSR1 into w.Drain, and any second signal into w.Kill,
// until the returned function is called.
func (a *app) forwardSignals(w *worker.Worker, killTimeout time.Duration) (stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, workerSignals...)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case s := <-sigs:
				n++
				switch {
				case n > 1:
					a.log.Warn("second signal: killing running tasks", "signal", s.String())
					w.Kill()
				case drainSignal != nil && s == drainSignal:
					a.log.Info("SIGUSR1: finishing running tasks, taking no new ones")
					w.Drain()
				default:
					a.log.Info("stopping: running tasks get SIGTERM and are requeued; send the signal again to kill them", "signal", s.String(),
						"exit_within", formatDuration(killTimeout))
					w.Stop()
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		signal.Stop(sigs)
	}
}

// workerExit maps the error that ended a worker to the CLI's exit status.
func workerExit(err error) error {
	switch {
	case errors.Is(err, worker.ErrPreempted):
		return &exitError{code: ExitPreempted, err: err}
	case errors.Is(err, worker.ErrTooManyFailures):
		return failure(err)
	case errcode.Of(err) == errcode.InvalidArgument:
		// A setting the backend refuses, such as a visibility timeout
		// above its maximum.
		return asUsage(err)
	case err != nil:
		return failure(err)
	}
	return nil
}

// pullResult is the outcome of a pull (a worker run for one task), whose
// last settlement event was ev (nil for none): a failure when the task
// failed or its settlement was not stored, and a note when there was no
// task: that the queue was empty only when the worker ended for that
// (reason, its EndReason), not when it was stopped waiting on a paused
// queue, say.
func (a *app) pullResult(c worker.Counts, ev *worker.Event, reason string) error {
	switch {
	case c.Failed > 0:
		return failure(errors.New("the task failed"))
	case ev != nil && ev.SettleErr != nil:
		return failure(a.unsettled(ev))
	case c.Done == 0 && c.Cancelled == 0 && (c.Requeued > 0 || c.LeaseLost > 0):
		return &exitError{code: ExitPutBack, err: putBack(ev)}
	case ev == nil && c.Done == 0 && c.Requeued == 0 && c.LeaseLost == 0:
		if reason == endreason.QueueEmpty {
			a.log.Info("queue is empty: nothing to pull")
		} else {
			a.log.Info("pulled no task", "reason", reason)
		}
	}
	return nil
}

// putBack says why the task of a pull, whose last event was ev, did not
// end.
func putBack(ev *worker.Event) error {
	switch {
	case ev == nil:
		return errors.New("the task did not end: it was put back, and runs again later")
	case ev.Outcome == worker.LockLost:
		return fmt.Errorf("task %s did not end here: its lease was lost, so another worker may run it", ev.Task.ID)
	case ev.Err != nil:
		return fmt.Errorf("task %s did not end: it was put back (%v), and runs again later", ev.Task.ID, ev.Err)
	}
	return fmt.Errorf("task %s did not end: it was put back, and runs again later", ev.Task.ID)
}

// unsettled says what became of the task of ev, whose settlement was not
// stored, or whose answer was lost.
func (a *app) unsettled(ev *worker.Event) error {
	what := "settled (" + string(ev.Outcome) + ")"
	if ev.Outcome == worker.Completed {
		what = "completed"
	}
	if hooks.MaybeApplied(ev.SettleErr) {
		return fmt.Errorf("task %s ran, and whether it was %s is unknown (the queue's answer was lost): if it was not, it is delivered again when its lease expires; check with: %s: %w",
			ev.Task.ID, what, a.commandHint("result "+ev.Task.ID), ev.SettleErr)
	}
	return fmt.Errorf("task %s ran but could not be %s: it is delivered again when its lease expires: %w", ev.Task.ID, what, ev.SettleErr)
}

// checkPreemption checks --preemption and takes the metadata endpoint from
// $JOBQ_METADATA_ENDPOINT when --metadata-endpoint is not given.
func (f *workerFlags) checkPreemption(cmd *cobra.Command) error {
	switch f.preemption {
	case preempt.Auto, preempt.Azure, preempt.GCP, preempt.Off:
	default:
		return usageError("--preemption %q: use auto, azure, gcp or off", f.preemption)
	}
	flag := "--metadata-endpoint"
	if fl := cmd.Flags().Lookup("metadata-endpoint"); fl != nil && !fl.Changed {
		if v := os.Getenv("JOBQ_METADATA_ENDPOINT"); v != "" {
			f.metadata, flag = v, "$JOBQ_METADATA_ENDPOINT"
		}
	}
	if f.metadata == "" {
		return nil
	}
	u, err := url.Parse(f.metadata)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return usageError("%s %q: give the metadata service's base URL, such as %s", flag, f.metadata, preempt.DefaultEndpoint)
	}
	return nil
}

// setPrefetch takes a --prefetch given on the command line (0: none) as
// worker.Options.Prefetch (where 0 is the default and -1 none).
func (f *workerFlags) setPrefetch(n int) error {
	switch {
	case n < 0:
		return usageError("--prefetch is %d; use 0 (none) or more", n)
	case n == 0:
		f.prefetch = -1
	default:
		f.prefetch = n
	}
	return nil
}
