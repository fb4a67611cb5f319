package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker/preempt"
)

// Options configure a Worker. The zero value is what a Go service wants:
// ten tasks at a time, claims that keep fast handlers busy, ten-minute
// leases with a heartbeat, no stop on failures, per-task log lines at DEBUG.
// It returns when the queue is empty unless Wait is set.
//
// How many tasks a worker holds: at most Concurrency run at once, and while
// handlers are fast up to Prefetch more wait, claimed, for a free handler
// (so a worker holds at most Concurrency+Prefetch leases). Receivers
// receives share that room: each claims up to the free room when it
// starts, so more receivers make smaller claims, not more tasks.
type Options struct {
	// Concurrency is how many tasks run at once: the number of handler
	// slots. Defaults to 10, for handlers that mostly wait on I/O; set it
	// to runtime.GOMAXPROCS(0) for CPU-bound handlers, or 1 to run tasks
	// one at a time (the CLI's default, --num-workers 1).
	Concurrency int
	// Receivers is how many receives may be in flight at once, each asking
	// for its share of the free slots (free handlers plus free prefetch
	// room), so that claims overlap each other and the settlement of
	// finished tasks (a single receive loop caps fast handlers at one round
	// trip per batch). Defaults to 2, capped at Concurrency+Prefetch (so
	// Concurrency 1 with Prefetch disabled has one). On an empty queue only
	// one of them polls.
	Receivers int
	// Prefetch is how many tasks beyond Concurrency the worker may hold
	// claimed, waiting for a handler, while handlers are fast (their recent
	// mean duration under 50ms): it hides the claim round trip behind
	// running tasks and makes claims larger. A waiting task's lease is
	// renewed; one not started when the worker drains is requeued at once.
	// With slower handlers nothing is prefetched, so long tasks are never
	// held back from other workers. Defaults to four times Concurrency
	// (40 with the default Concurrency); negative disables it.
	Prefetch int
	// Visibility is the lease taken on each task. Defaults to 10 minutes.
	Visibility time.Duration
	// DisableHeartbeat turns off lease renewal. Without it a task that runs
	// longer than Visibility loses its lease and is stopped (another worker
	// may receive it). By default the lease is renewed every Visibility/2.
	DisableHeartbeat bool
	// MaxConsecutiveFailures stops the worker (Run returns
	// ErrTooManyFailures) when more task attempts than this fail in a row; a success
	// resets the count. Zero (the default) or negative means no limit: a
	// service keeps running while its tasks fail, each one retried or
	// dead-lettered. (The CLI's --max-consecutive-failures defaults to 2.)
	MaxConsecutiveFailures int
	// MaxLostLeases dead-letters a task whose lease expired on this many
	// deliveries in a row: each time its worker died or hung, or the task
	// outlasted its lease (DisableHeartbeat and a task longer than
	// Visibility), so it would otherwise be delivered forever, since a
	// lost lease spends no retry. The count is inferred by the next
	// receiver from the attempt history, so it applies where the backend
	// keeps one (elsewhere every delivery spends a retry). Defaults to 10;
	// negative means no limit.
	MaxLostLeases int
	// FailureBackoff pauses the worker after consecutive failures, before
	// it takes more work; off by default. See FailureBackoff.
	FailureBackoff FailureBackoff
	// TimeLimit stops the worker as Stop does once it has run this long.
	// Zero means no limit.
	TimeLimit time.Duration
	// StopTimeout bounds a stop (Stop, and what calls it: the time limit,
	// ctx ending, a preemption notice), whether or not the engine accepts
	// writes. Tasks still running shortly before it passes are killed (as
	// Kill does; a fifth of it before, at most 5 seconds), so that they can
	// be requeued; a tenth of it before it passes (at most a second), the
	// worker gives up the settlements the engine has not accepted (a full
	// disk, say) and logs which tasks they were, and Run returns by the
	// timeout: those tasks are delivered again once their leases expire.
	// Zero (the default) means no bound: a refused settlement is retried
	// until its lease expires. (The CLI sets it to --kill-timeout.)
	StopTimeout time.Duration
	// TaskTimeLimit bounds each attempt at a task: once its handler has run
	// this long its context is canceled with a cause matching ErrTimeLimit
	// (a shell task's process group gets SIGTERM, then SIGKILL after
	// Shell.KillTimeout), and the attempt counts as a failure, retried
	// while the task's budget lasts. A task's own Task.TimeLimit overrides
	// it. Zero (the default) means no limit.
	TaskTimeLimit time.Duration
	// CancelPoll is how often the worker asks the queue, in one lookup for
	// all its running tasks, whether a cancel was requested for any of
	// them (Admin.Cancel); a cancelled task is stopped as at its time limit
	// and settled as cancelled: not retried, not counted as a failure.
	// Defaults to 5 seconds; negative disables it. Backends that keep no
	// results (the Cancel feature Unsupported) are never asked.
	CancelPoll time.Duration
	// Wait keeps polling an empty queue instead of returning.
	Wait bool
	// NoSchedules keeps this worker from firing the queue's recurring
	// schedules (Admin.AddSchedule) and from sweeping its held tasks
	// (dependencies and group steps, Admin.SweepHeld). By default every
	// worker does both from a background loop every
	// driver.ScheduleRefresh (one policy read and one read of the held
	// tasks each, off the task path; while a pass finds nothing held and
	// fires nothing, the pause doubles up to MaxPoll, never past a
	// schedule's next slot), and sweeps once more before it exits
	// on an empty queue, so that no separate process is needed; each slot
	// is pushed and each held task released once however many workers do.
	// Defaults to false.
	NoSchedules bool
	// NoHistoryRollups keeps this worker from rolling up the queue's
	// result records (Admin.FillRollups). By default, where the backend
	// keeps rollups (SQLite, Postgres), every worker checks when each
	// ten-minute slot ends whether it is rolled up (one indexed read) and,
	// when not, rolls it up (one pass over the records per slot, done by
	// one worker of the queue), so that the dashboard's history reads
	// rollups even when it opens after a drain. Defaults to false.
	NoHistoryRollups bool
	// MaxTasks stops taking tasks after this many have run (the CLI's pull
	// uses 1); a task put back unrun (a pause, a limit, a gate) does not
	// count. Zero means no limit.
	MaxTasks int
	// Poll is how long one receive call waits for a message before the
	// worker checks whether the queue is drained. Defaults to 1 second.
	Poll time.Duration
	// MaxPoll caps how long one receive waits while a Wait worker finds
	// the queue empty: the wait starts at Poll and doubles after every
	// empty receive, up to MaxPoll, and a receive that brings a task sets
	// it back to Poll. On a backend that is woken by pushes (Postgres
	// with LISTEN, Redis, SQLite, Service Bus) a longer wait delays no
	// pickup and only saves the engine the idle worker's claims. Defaults
	// to DefaultMaxPoll; at most Poll (or negative) keeps the wait at Poll.
	MaxPoll time.Duration
	// StatusInterval is how often a status line (tasks done, failures, the
	// rate, and at most every minute the queue's size and an estimate of
	// when it drains) is logged while tasks end; while none do, a line
	// comes every 5 minutes. Defaults to 10 seconds; negative disables it.
	StatusInterval time.Duration
	// Gate tunes gate commands; see GateConfig. Zero fields take defaults.
	Gate GateConfig
	// GateRunner runs a gate command and returns nil when it passes.
	// Defaults to running it with bash -c in its own process group, killed
	// after Gate.Timeout.
	GateRunner func(ctx context.Context, cmd string) error
	// Preemption watches for notice that the machine is about to be taken
	// away (a spot VM's eviction; see package preempt). On a notice the
	// worker stops as Stop does, kills the tasks still running before the
	// notice's deadline, requeues them without using a retry, acknowledges
	// the notice and returns ErrPreempted. Nil (the default) watches
	// nothing.
	Preemption preempt.Watcher
	// PassEnv lists withheld variables (see Withheld) that the default
	// GateRunner's gate commands get all the same, as Shell.PassEnv does
	// for tasks.
	PassEnv []string
	// WorkerID names this worker in attempt histories. Defaults to the
	// host name and the process ID.
	WorkerID string
	// HeartbeatInterval is how often the worker writes its record (current
	// tasks, CPU and memory use) to the queue's worker registry, which
	// `jobq QUEUE workers` and Admin.Workers list; it announces itself when
	// Run starts and withdraws when Run returns. A worker silent for three
	// intervals is listed as vanished. Defaults to 10 seconds; negative
	// keeps the worker out of the registry. Backends without the
	// worker-registry feature keep no records. Give each Worker of one
	// process on one queue its own WorkerID, or they share one record.
	HeartbeatInterval time.Duration
	// Version is the version the worker announces in the registry.
	// Defaults to the main module's version from the build information.
	Version string
	// Logger receives the worker's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Checkpoints gives every task a checkpoint that survives its attempt
	// (docs/checkpoints.md): a shell task gets $JOBQ_CHECKPOINT_DIR, saved
	// to the queue's stash when the task is stopped (preemption, SIGTERM,
	// its time limit), every CheckpointEvery and when the task writes the
	// marker file CheckpointMarker; a Go handler uses Job.SaveCheckpoint
	// and Job.Checkpoint. The next attempt, on any worker, starts from the
	// last checkpoint. It needs a stash: Run fails at once without one.
	// Off by default; a worker without it makes no stash round trip.
	Checkpoints bool
	// CheckpointEvery is how often a running shell task's checkpoint
	// directory is saved, when it changed. Zero (the default) saves only
	// at a stop and on the task's request; setting it turns Checkpoints on.
	CheckpointEvery time.Duration
	// CheckpointMaxBytes bounds one checkpoint; a larger one is not saved
	// (the previous stays) and a warning is logged. Defaults to
	// DefaultCheckpointMaxBytes (1 GiB); checkpoints are held in memory
	// while they are saved or restored.
	CheckpointMaxBytes int64
	// EnvLabel names the environment the worker runs in (a VM size and
	// region, a host), carried in its heartbeats and in the attempts and
	// result records of the tasks it runs, so that preemptions and lost
	// work can be counted per environment. Defaults to the host name; the
	// CLI's --env-label defaults to the cloud VM size and region from the
	// instance metadata service when there is one.
	EnvLabel string
	// TaskLogLevel is the level of the lines logged for every task ("task
	// started", "task done", "task requeued"). Defaults to slog.LevelDebug,
	// so that a busy worker logs only what needs attention (failures, lost
	// leases, status); the CLI sets slog.LevelInfo. Failures are logged at
	// WARN and ERROR whatever this says.
	TaskLogLevel slog.Leveler
}

// receiveGiveUp is how long receives may keep failing (with errors other
// than ResourceExhausted) before the worker gives up and Run returns the
// error.
const receiveGiveUp = 5 * time.Minute

// DefaultMaxPoll is the default Options.MaxPoll: an idle waiting worker
// looks at an empty queue at least this often.
const DefaultMaxPoll = 30 * time.Second

// defaultConcurrency is the default Options.Concurrency.
const defaultConcurrency = 10

// DefaultMaxLostLeases is the default Options.MaxLostLeases.
const DefaultMaxLostLeases = 10

// defaultReceivers is the default Options.Receivers (capped by
// Concurrency+Prefetch). Two already keep every free slot in a receive (one
// gathers slots while the other's claim is in flight); more only split
// the slots into smaller claims, and a claim costs about the same for one
// task as for several (docs/running-workers.md, "Throughput").
const defaultReceivers = 2

// prefetchPerHandler sets the default Options.Prefetch: with two receives
// in flight, a worker needs at least two claims' worth of tasks beyond its
// handlers to keep them busy through both round trips, and larger claims
// cost the engine less per task (docs/performance.md, "Worker settings").
const prefetchPerHandler = 4

// limitDefaults fills in the failure and lost-lease limits.
func (o Options) limitDefaults() Options {
	if o.MaxConsecutiveFailures == 0 {
		o.MaxConsecutiveFailures = -1
	}
	if o.MaxLostLeases == 0 {
		o.MaxLostLeases = DefaultMaxLostLeases
	}
	return o
}

func (o Options) withDefaults() Options {
	if o.Concurrency < 1 {
		o.Concurrency = defaultConcurrency
	}
	switch {
	case o.Prefetch == 0:
		o.Prefetch = prefetchPerHandler * o.Concurrency
	case o.Prefetch < 0:
		o.Prefetch = 0
	}
	if o.Receivers < 1 {
		o.Receivers = defaultReceivers
	}
	o.Receivers = min(o.Receivers, o.Concurrency+o.Prefetch)
	if o.Visibility <= 0 {
		o.Visibility = 10 * time.Minute
	}
	o = o.limitDefaults()
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.MaxPoll == 0 {
		o.MaxPoll = DefaultMaxPoll
	}
	o.MaxPoll = max(o.MaxPoll, o.Poll)
	if o.StatusInterval == 0 {
		o.StatusInterval = 10 * time.Second
	}
	if o.CancelPoll == 0 {
		o.CancelPoll = defaultCancelPoll
	}
	o.Gate = o.Gate.withDefaults()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.TaskLogLevel == nil {
		o.TaskLogLevel = slog.LevelDebug
	}
	if o.CheckpointEvery > 0 {
		o.Checkpoints = true
	}
	if o.CheckpointMaxBytes <= 0 {
		o.CheckpointMaxBytes = DefaultCheckpointMaxBytes
	}
	if o.EnvLabel == "" {
		o.EnvLabel = hostname()
	}
	if o.WorkerID == "" {
		o.WorkerID = defaultWorkerID()
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = driver.DefaultWorkerHeartbeat
	}
	if o.Version == "" {
		o.Version = defaultVersion()
	}
	if o.GateRunner == nil {
		o.GateRunner = func(ctx context.Context, cmd string) error {
			return runGate(ctx, cmd, o.Gate.Timeout, o.PassEnv, o.Logger)
		}
	}
	return o
}
