package worker

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/worker/preempt"
)

// Handler runs one task. It returns nil when the task succeeded. Its context
// is cancelled when the task must stop: the lease was lost
// (errors.Is(context.Cause(ctx), errcode.LockLost)), and the worker then
// leaves the task to the lease's new holder whatever the handler returns,
// or the worker is stopping, and it then requeues the task unless the
// handler returns nil (which completes it). A Handler that returns an error wrapping ErrPermanent (see
// Permanent) has its task dead-lettered at once; any other error is retried
// while the task's budget lasts; a panic is such an error (a *TaskError:
// "handler panicked: ...", the stack as its detail), recovered so that the
// worker goes on. Mux routes tasks to Handlers by kind.
type Handler interface {
	Handle(ctx context.Context, job *Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, job *Job) error { return f(ctx, job) }

// Job is one task being run.
type Job struct {
	// Task is the received task.
	Task *jobq.Task
	// Envelope is the lease on it. The worker renews and settles it; a
	// handler reads it (DeliveryCount, say) but must not settle it.
	Envelope *jobq.Envelope
	// Log is the worker's logger with the task's ID attached.
	Log *slog.Logger
	// QueueName is the name of the queue the task came from.
	QueueName string

	kill <-chan struct{}
	ckpt *taskCheckpoint // nil when the worker keeps no checkpoints
	// ckptEvery is Options.CheckpointEvery, for the shell handler.
	ckptEvery time.Duration
}

// Kill returns a channel closed when the worker escalates a stop to a kill
// (a second signal): a handler still cleaning up must stop at once.
func (j *Job) Kill() <-chan struct{} { return j.kill }

// Counts are a worker's running totals.
type Counts struct {
	// Done tasks completed successfully.
	Done int64
	// Failed attempts, retried or dead-lettered.
	Failed int64
	// DeadLettered tasks, a subset of Failed.
	DeadLettered int64
	// Requeued tasks were put back because the worker stopped or their gate
	// failed.
	Requeued int64
	// Cancelled tasks were stopped or dropped because a cancel was
	// requested for them (Admin.Cancel); not counted in Failed.
	Cancelled int64
	// LeaseLost tasks were stopped because their lease was lost.
	LeaseLost int64
	// EventsDropped counts the events (Subscribe) not delivered because a
	// subscriber's buffer was full.
	EventsDropped int64
}

// Worker runs tasks from one queue. Create it with New, run it with Run.
type Worker struct {
	q    *jobq.Queue
	h    Handler
	o    Options
	log  *slog.Logger
	gate *gatekeeper
	// pauser and limits are the failure backoff and the per-process policy
	// enforcement (backpressure.go).
	pauser *failurePauser
	limits *localLimits
	paused *pauseWatch // the queue's pauses (pause.go)
	sweeps heldSweeps  // its sweeps of held tasks, one at a time (schedule.go)
	host   string      // for attempt histories
	// keepsResults: the backend keeps result records, which name the
	// worker and times of a task's last attempt even when it succeeded.
	keepsResults bool
	// watchCancels: the worker asks for cancel requests for its running
	// tasks (cancel.go).
	watchCancels bool
	// trackRunning: it tracks its running tasks (inflight), for cancel
	// requests or for the task list of its registry record.
	trackRunning bool
	purgeEvery   time.Duration // about how often expired result records are purged (purge.go)
	rollupFirst  time.Duration // when the first rollup check runs after the start (rollups.go)
	// receiveGiveUp is how long receives may fail before the worker ends
	// (not counting those refused for want of resources).
	receiveGiveUp time.Duration
	pace          *handlerPace
	stall         *writeStall // pauses the worker while the engine refuses settlements (stall.go)

	drainOnce, killOnce, killedOnce sync.Once
	drainCh                         chan struct{} // closed: take no new tasks
	killCh                          chan struct{} // closed: kill running tasks now
	killed                          chan struct{} // closed by Kill: refused settlements are given up
	// stopCtx is canceled, with cause errStopping, when running tasks must
	// stop and be requeued; so are the tasks' contexts (leaseKeeper.stopAll).
	stopCtx    context.Context
	stopCancel context.CancelCauseFunc
	leases     *leaseKeeper
	// writeCtx is the parent of every settlement's context; it is
	// cancelled, and giveUp closed, when the stop timeout passes
	// (Options.StopTimeout, stoptimeout.go): writes the engine has not
	// accepted by then are given up.
	writeCtx    context.Context
	writeCancel context.CancelFunc
	giveUp      chan struct{}
	boundOnce   sync.Once
	finished    chan struct{} // closed when Run returns
	ran         atomic.Bool   // Run was called: a Worker runs once
	argErr      error         // what New was given wrong, which Run returns

	mu          sync.Mutex
	running     int
	consecutive int
	fatal       error
	endReason   string
	notice      *preempt.Notice // the preemption notice that stopped the worker

	done, failed, dead, requeued, lost, cancelled atomic.Int64
	// unsettled counts the tasks that ran to success but whose completion
	// failed or is of unknown outcome (Counts leaves them out).
	unsettled atomic.Int64
	inflight  running // the running tasks, for cancel requests (cancel.go) and the registry
	started   time.Time

	tel           *telemetry // metrics (telemetry.go)
	events        events     // subscriptions to settlement events (events.go)
	eventsDropped atomic.Int64

	reg *registry // this worker's record in the worker registry (registry.go)

	ckpt *checkpoints // nil when checkpoints are off (checkpoint.go)
	// work totals, in nanoseconds, for the registry (worktime.go)
	workDone, workLost, workSaved, preemptions atomic.Int64
}

// New returns a worker that runs h on tasks from q. A nil q or h makes its
// Run return an InvalidArgument error.
func New(q *jobq.Queue, h Handler, opts Options) *Worker {
	o := opts.withDefaults()
	log := o.Logger
	stopCtx, stopCancel := context.WithCancelCause(context.Background())
	writeCtx, writeCancel := context.WithCancel(context.Background())
	w := &Worker{
		o: o, log: log,
		stopCtx: stopCtx, stopCancel: stopCancel,
		writeCtx: writeCtx, writeCancel: writeCancel,
		giveUp:   make(chan struct{}),
		finished: make(chan struct{}),
		drainCh:  make(chan struct{}),
		killCh:   make(chan struct{}),
		killed:   make(chan struct{}),
	}
	w.leases = newLeaseKeeper(w) // Stop ends the held tasks through it
	if w.argErr = checkArgs(q, h); w.argErr != nil {
		return w // Run returns the error; Stop, Drain and Counts still work
	}
	w.q, w.h = q, h
	w.gate = newGatekeeper(o.Gate, o.GateRunner, log)
	w.pauser = newFailurePauser(o.FailureBackoff)
	w.pace = newHandlerPace()
	w.stall = newWriteStall(log)
	w.limits = newLocalLimits(q, log)
	w.paused = newPauseWatch(q, log)
	w.host = hostname()
	w.keepsResults = q.Capabilities().Level(driver.Results) != driver.Unsupported
	w.receiveGiveUp = receiveGiveUp
	w.purgeEvery = purgeEvery
	w.rollupFirst = rand.N(rollupJitter)
	w.reg = newRegistry(w)
	w.watchCancels = w.cancelsRunning()
	w.trackRunning = w.watchCancels || w.reg.on()
	w.tel = newTelemetry(q, w)
	return w
}

// checkArgs refuses what New cannot run.
func checkArgs(q *jobq.Queue, h Handler) error {
	switch {
	case q == nil:
		return driver.Errorf(errcode.InvalidArgument, "worker: the queue is nil: pass the *jobq.Queue that jobq.Open returned")
	case h == nil:
		return driver.Errorf(errcode.InvalidArgument, "worker: the handler is nil: pass a Handler (worker.NewShell(), a HandlerFunc or a Mux)")
	}
	if _, shell := h.(*Shell); shell && shellUnsupported != nil {
		return driver.Errorf(errcode.Unimplemented, "worker: %w", shellUnsupported)
	}
	return nil
}

// Run creates a worker and runs it until the queue is drained (or forever
// with Options.Wait), the time limit passes, or ctx ends; ending ctx works
// as Stop.
func Run(ctx context.Context, q *jobq.Queue, h Handler, opts Options) error {
	return New(q, h, opts).Run(ctx)
}

// Drain makes the worker take no new tasks; running ones finish and are
// settled as usual, then Run returns. (SIGUSR1 in the CLI.)
func (w *Worker) Drain() {
	w.end("drained: no new tasks taken")
	w.drainOnce.Do(func() { close(w.drainCh) })
}

// Stop makes the worker take no new tasks and cancels running ones; each is
// requeued at once, for another worker, when its handler returns. With
// Options.StopTimeout, Run returns within it even if the engine refuses
// those writes. (SIGTERM and SIGINT in the CLI; also what the time limit
// does.)
func (w *Worker) Stop() {
	w.end("stopped: running tasks requeued")
	w.Drain()
	w.stopCancel(errStopping) // only the first cause counts
	w.leases.stopAll(errStopping)
	if d := w.o.StopTimeout; d > 0 && w.argErr == nil {
		w.boundOnce.Do(func() { go w.stopWithin(d) })
	}
}

// Kill is Stop, and tells handlers to stop at once (the shell processor
// sends SIGKILL to the process groups). (A second signal in the CLI.)
func (w *Worker) Kill() {
	w.Stop()
	w.killTasks()
	w.killedOnce.Do(func() { close(w.killed) })
}

// killTasks tells handlers to stop at once (Job.Kill).
func (w *Worker) killTasks() {
	w.killOnce.Do(func() { close(w.killCh) })
}

// Counts returns the running totals.
func (w *Worker) Counts() Counts {
	return Counts{Done: w.done.Load(), Failed: w.failed.Load(), DeadLettered: w.dead.Load(),
		Requeued: w.requeued.Load(), Cancelled: w.cancelled.Load(), LeaseLost: w.lost.Load(), EventsDropped: w.eventsDropped.Load()}
}

// EndReason says why Run returned, for a final log line: "queue empty",
// "time limit reached", and so on. Empty while running.
func (w *Worker) EndReason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.endReason
}

// taskLevel is the level of the per-task log lines (Options.TaskLogLevel,
// read each time so that a *slog.LevelVar can change it).
func (w *Worker) taskLevel() slog.Level { return w.o.TaskLogLevel.Level() }

// end records the first reason the worker stops taking work.
func (w *Worker) end(reason string) {
	w.mu.Lock()
	if w.endReason == "" {
		w.endReason = reason
	}
	w.mu.Unlock()
}

// Run takes and runs tasks until the queue is drained (unless Options.Wait),
// Drain or Stop is called, the time limit passes, or ctx ends (as Stop). It
// returns nil then, or ErrTooManyFailures or ErrPreempted (wrapped), or the
// error that made receiving impossible. Tasks still running when it returns have been
// settled, and the channels of Subscribe are closed. A Worker runs once: a
// second call returns a FailedPrecondition error.
func (w *Worker) Run(ctx context.Context) error {
	if w.ran.Swap(true) {
		return driver.Errorf(errcode.FailedPrecondition, "worker: Run was called again: a Worker runs once; make another with worker.New")
	}
	if w.argErr != nil {
		close(w.finished)
		w.closeEvents()
		return w.argErr
	}
	var err error
	if w.ckpt, err = newCheckpoints(w); err != nil {
		close(w.finished)
		w.closeEvents()
		return err
	}
	if w.ckpt != nil {
		defer w.ckpt.dirs.close()
	}
	w.started = time.Now()
	defer close(w.finished)
	defer w.closeEvents()
	defer w.reg.start()() // announce now, heartbeat, withdraw on return
	// The schedule loop is waited for after stopWatch closes (defers run
	// last in, first out), so that no pass outlives Run.
	var firing sync.WaitGroup
	defer firing.Wait()
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		var limit <-chan time.Time
		if w.o.TimeLimit > 0 {
			t := time.NewTimer(w.o.TimeLimit)
			defer t.Stop()
			limit = t.C
		}
		select {
		case <-ctx.Done():
			w.end("stopped: " + context.Cause(ctx).Error())
			w.Stop()
		case <-limit:
			w.log.Info("time limit reached: stopping; running tasks are requeued", "time_limit", w.o.TimeLimit)
			w.end("time limit reached")
			w.Stop()
		case <-stopWatch:
		}
	}()
	if w.o.StatusInterval > 0 {
		go w.statusLoop(stopWatch)
	}
	go w.leases.run(stopWatch)
	if w.watchCancels {
		go w.cancelLoop(stopWatch)
	}
	if w.purgesResults() {
		go w.purgeLoop(stopWatch)
		if !w.o.NoHistoryRollups {
			go w.rollupLoop(stopWatch)
		}
	}
	if !w.o.NoSchedules && (firesSchedules(w.q) || sweepsHeld(w.q)) {
		firing.Add(1)
		go func() {
			defer firing.Done()
			scheduleLoop(w.q, w.log, stopWatch, w.o.MaxPoll, &w.sweeps)
		}()
	}
	if w.o.Preemption != nil {
		watchCtx, cancelWatch := context.WithCancel(context.Background())
		defer cancelWatch()
		go w.watchPreemption(watchCtx)
	}

	err = w.dispatch()
	w.mu.Lock()
	if w.fatal != nil {
		err = w.fatal
	}
	w.mu.Unlock()
	if n := w.preempted(); n != nil && err == nil {
		err = w.acknowledge(n)
	}
	w.logFinished()
	return err
}

// logFinished logs the final summary: the end's reason and the totals.
func (w *Worker) logFinished() {
	c := w.Counts()
	attrs := []any{"reason", w.EndReason(), "done", c.Done, "failed", c.Failed,
		"dead_lettered", c.DeadLettered, "requeued", c.Requeued, "cancelled", c.Cancelled, "lease_lost", c.LeaseLost}
	if n := w.unsettled.Load(); n > 0 {
		// Succeeded, not known completed: neither done nor failed.
		attrs = append(attrs, "succeeded_not_completed", n)
	}
	w.log.Info("worker finished", append(attrs, "elapsed", time.Since(w.started).Round(time.Millisecond))...)
}

// drained reports whether the queue holds nothing this worker could take:
// no ready task, and no delayed task other than those this worker itself
// put back after their gate failed (it would only reject them again).
// Tasks leased by other workers do not keep it: if one of them fails, its
// retry is for whichever worker is still running.
func (w *Worker) drained() bool {
	released := w.sweeps.released.Load() // before the stats: see the end
	st, err := w.q.Admin().Stats(context.Background())
	if err != nil {
		w.log.Debug("stats unavailable; treating the empty receive as an empty queue", "error", err)
		return true
	}
	deferred := w.gate.pendingDeferred()
	ready := st.Ready
	if !st.Known.Delayed {
		// Backends that cannot tell delayed messages apart count them as
		// ready (Azure's approximate count includes them, and leased ones).
		ready -= deferred
	}
	if st.Known.Ready && ready > 0 {
		return false
	}
	if st.Known.Delayed && st.Delayed > deferred {
		return false
	}
	// A sweep of the background loop may have released a task after the
	// stats were read, and this one then found it gone.
	return !w.releasedHeld() && w.sweeps.released.Load() == released
}

// releasedHeld sweeps the queue's held tasks, where this worker sweeps
// them, and reports whether it queued one: a worker that ran the last task
// of a group does not exit before the group's step (or a dependant) is
// released. A sweep that cancelled tasks is followed by another, since
// their dependants are decided from the records it wrote: a chain of
// dependants is cancelled to its end before the worker exits. One short
// read when nothing is held.
func (w *Worker) releasedHeld() bool {
	if w.o.NoSchedules || !sweepsHeld(w.q) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), scheduleTimeout)
	defer cancel()
	for range maxExitSweeps {
		released, cancelled, _, err := w.sweeps.sweep(ctx, w.q, w.log)
		if err != nil {
			w.log.Warn("could not sweep the queue's held tasks", "error", err)
			return false
		}
		if len(released) > 0 {
			return true
		}
		if len(cancelled) == 0 {
			return false
		}
	}
	return false
}

// maxExitSweeps bounds the sweeps of releasedHeld: the depth of a chain of
// dependants it cancels before the worker exits (deeper ones are left to
// the next worker or scheduler).
const maxExitSweeps = 100

// Status lines: every StatusInterval while tasks end, else every
// idleStatusEvery; the queue's size (a query to the engine, costly at
// depth) at most every sizeStatusEvery.
const (
	idleStatusEvery = 5 * time.Minute
	sizeStatusEvery = time.Minute
)

// statusLoop logs the status lines until stop is closed.
func (w *Worker) statusLoop(stop <-chan struct{}) {
	t := time.NewTicker(w.o.StatusInterval)
	defer t.Stop()
	s := statusState{line: time.Now()} // the first line has the size
	for {
		select {
		case now := <-t.C:
			if attrs, ok := s.next(now, w.Counts(), w.queueSize); ok {
				w.log.Info("status", attrs...)
			}
		case <-stop:
			return
		}
	}
}

// queueSize is the queue's size for the status line; false when unknown.
func (w *Worker) queueSize() (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := w.q.Admin().Size(ctx)
	return n, err == nil
}

// statusState is what the status loop remembers between lines.
type statusState struct {
	line, size time.Time // when the last line, and the last size, was logged
	settled    int64     // tasks settled at the last line
}

// next returns the attributes of the status line due at now, if one is:
// when tasks ended since the last line, or idleStatusEvery after it. The
// rate is over the time since the last line; the queue's size, and an
// estimate of when it is drained at that rate, come at most every
// sizeStatusEvery.
func (s *statusState) next(now time.Time, c Counts, size func() (int64, bool)) ([]any, bool) {
	settled := c.Done + c.Failed + c.Cancelled
	if settled == s.settled && now.Sub(s.line) < idleStatusEvery {
		return nil, false
	}
	rate := float64(settled-s.settled) / now.Sub(s.line).Seconds()
	attrs := []any{"done", c.Done, "failed", c.Failed, "dead_lettered", c.DeadLettered, "rate_per_s", fmt.Sprintf("%.1f", rate)}
	if now.Sub(s.size) >= sizeStatusEvery {
		if n, ok := size(); ok {
			s.size = now
			attrs = append(attrs, "queue_size", n)
			if rate > 0 && n > 0 {
				attrs = append(attrs, "eta", time.Duration(float64(n)/rate*float64(time.Second)).Round(time.Second).String())
			}
		}
	}
	s.line, s.settled = now, settled
	return attrs, true
}

// setFatal records an error that ends the worker, and stops taking work.
func (w *Worker) setFatal(err error) {
	w.stopFatal("too many consecutive failures", err)
}

// stopFatal records err, which Run returns, and reason, and stops taking
// work (running tasks finish).
func (w *Worker) stopFatal(reason string, err error) {
	w.mu.Lock()
	if w.fatal == nil {
		w.fatal = err
	}
	w.mu.Unlock()
	w.end(reason)
	w.Drain()
}
