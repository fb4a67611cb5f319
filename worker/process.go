package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/envmask"
	"github.com/jobq/jobq/internal/hooks"
)

// settleTimeout bounds one attempt of a requeue or a failure's settlement;
// the task's own context may be cancelled by then. (A completion goes
// through the queue's batching, which bounds each batch itself.) A refused
// settlement is tried again (Worker.settle).
const settleTimeout = 30 * time.Second

// process runs one received task and settles it. It runs the task once its
// ticket holds a handler (waiting, if the task was prefetched) and releases
// the handler when the task no longer runs, before the task is settled, so
// the next task starts while this one settles; tr.ran is called then. It
// reports whether the task was put back without running (a pause, a
// limit or a gate stopped it), which does not count towards MaxTasks.
func (w *Worker) process(tr *taskRun) (putBack bool) {
	env, ticket := tr.env, &tr.ticket
	log := tr.log.init(w.log, env.Task.ID)
	// The task's context ends when the worker stops (cause errStopping,
	// from the lease keeper), the lease is lost (cause errcode.LockLost)
	// or, while the handler runs, a cancel is requested (cause
	// ErrCancelled). It holds the task's process span (dispatcher.run
	// starts it).
	ctx, end := hooks.TaskContext(context.Background(), env)
	cancel := func() { end(context.Canceled) }
	w.leases.hold(ctx, end, &tr.lease, env, log)
	// let go ends the task's context and its renewals; every settlement
	// comes after it, so none races a renewal.
	held := true
	letGo := func() {
		if held {
			held = false
			cancel()
			w.leases.release(env)
		}
	}
	defer letGo()
	began := time.Now()
	if n, tooMany := w.lostTooOften(env, log); tooMany {
		// Recorded, so that the stored history covers the lost
		// deliveries: requeued from the dead letters, the task is not
		// taken for lost again.
		err := errLostLeases(n)
		w.record(env, began, jobq.OutcomeFailure, err)
		ticket.release()
		letGo()
		w.deadLetter(env, log, err, 0)
		return
	}

	select {
	case <-w.stopCtx.Done():
		w.record(env, began, jobq.OutcomeRequeued, errStopping)
		ticket.release()
		letGo()
		w.requeue(env, log, 0, "worker stopping before the task started")
		return
	default:
	}

	switch err := w.awaitHandler(env, ticket); {
	case errors.Is(err, errDraining):
		w.record(env, began, jobq.OutcomeRequeued, err)
		letGo()
		w.requeue(env, log, 0, "worker draining before the task started")
		return
	case err != nil:
		w.lost.Add(1)
		log.Warn("prefetched task dropped: its lease was lost before a handler was free (another worker may run it)")
		w.emit(Event{Task: env.Task, Outcome: LockLost, Err: err})
		return
	}
	free := func() {
		tr.freeOnce.Do(func() {
			ticket.release()
			tr.ran()
		})
	}
	defer free()

	if s, paused := w.paused.stops(env.Task); paused {
		// Claimed by a receive under way as the pause was read, or
		// stopped by a pause of its kind or key.
		why := "paused: " + s.Scope()
		w.record(env, began, jobq.OutcomePutBack, errors.New(why))
		letGo()
		w.requeue(env, log, pausedDelay(s), why)
		return true
	}
	releaseLimit, delay := w.limits.acquire(ctx, env.Task)
	if releaseLimit == nil {
		const why = "its concurrency or rate limit is reached on this worker"
		w.record(env, began, jobq.OutcomePutBack, errors.New(why))
		letGo()
		w.requeue(env, log, delay, why)
		return true
	}
	defer releaseLimit()

	if stop, putBack := w.gateStops(ctx, env, log, began, letGo); stop {
		return putBack
	}

	tc, ok := w.beginCheckpoint(ctx, env, log, began, letGo)
	if !ok {
		return
	}
	start := time.Now()
	if log.Enabled(ctx, w.taskLevel()) {
		log.Log(ctx, w.taskLevel(), "task started", "delivery", env.DeliveryCount, "what", describe(env.Task))
	}
	// The handler's context also ends at the task's time limit (cause
	// ErrTimeLimit).
	if w.trackRunning {
		w.inflight.track(env, end)
	}
	runCtx, unlimit := w.withTimeLimit(ctx, env.Task)
	tr.job = Job{Task: env.Task, Envelope: env, Log: log, QueueName: w.q.Name(), kill: w.killCh,
		ckpt: tc, ckptEvery: w.o.CheckpointEvery}
	err := w.handle(runCtx, &tr.job, log)
	cause := settlingCause(err, context.Cause(runCtx))
	unlimit()
	if w.trackRunning {
		w.inflight.untrack(env)
	}
	letGo()
	took := time.Since(start)
	elapsed := took.Round(time.Millisecond)
	err = stoppedBy(err, cause)
	failed := err != nil && !errors.Is(cause, errcode.LockLost) && !errors.Is(cause, errStopping) && !errors.Is(cause, ErrCancelled) &&
		!errors.Is(err, ErrSnoozed)
	// Count the outcome before freeing the slot, so that a worker past its
	// failure limit takes no further task.
	w.countOutcome(err == nil, failed, log)
	w.tel.ran(ctx, err, cause, took)
	w.pace.observe(took)
	w.workDone.Add(int64(took))
	free()
	if w.settleOutcome(tr, log, err, cause, start, elapsed, tc) {
		tc.drop(context.Background())
	}
	return false
}

// countOutcome feeds a task's outcome to the failure streak and its
// backoff, and stops the worker when the streak passes the limit.
func (w *Worker) countOutcome(success, failed bool, log *slog.Logger) {
	w.mu.Lock()
	if success {
		w.consecutive = 0
	} else if failed {
		w.consecutive++
	}
	streak := w.consecutive
	w.mu.Unlock()
	w.noteOutcome(success, failed, streak, log)
	if max := w.o.MaxConsecutiveFailures; failed && max >= 0 && streak > max {
		ferr := tooMany(streak, max)
		log.Error("stopping the worker", "error", ferr)
		w.setFatal(ferr)
	}
}

// settleOutcome settles a task whose handler returned err, its context
// having ended with cause (nil while it had not). A task stopped at its time
// limit fails as any other (err says so); a cancelled one whose handler did
// not succeed is settled as cancelled. It reports whether the task ended
// (its checkpoint, tc, is then of no further use).
func (w *Worker) settleOutcome(tr *taskRun, log *slog.Logger, err, cause error, start time.Time, elapsed time.Duration, tc *taskCheckpoint) (ended bool) {
	env := tr.env
	switch {
	case err == nil:
		if w.keepsResults {
			// For the result record: who ran the task, and when.
			w.recordInto(&tr.attempt, env, start, jobq.OutcomeSuccess, nil)
		}
		return w.complete(env, log, elapsed)
	case errors.Is(cause, errcode.LockLost):
		w.lost.Add(1)
		log.Warn("task stopped: its lease was lost (another worker may run it); not counted as a failure",
			"elapsed", elapsed, "visibility", w.o.Visibility, "heartbeat", !w.o.DisableHeartbeat)
		w.emit(Event{Task: env.Task, Outcome: LockLost, Err: cause, Elapsed: elapsed})
	case errors.Is(cause, errStopping):
		w.recordStop(env, start, tc)
		w.requeue(env, log, 0, "worker stopping")
	case errors.Is(cause, ErrCancelled):
		w.cancel(env, log, start, true, elapsed)
		return true
	case errors.Is(err, ErrSnoozed):
		se, _ := snoozeOf(err)
		w.record(env, start, jobq.OutcomeSnoozed, err)
		w.requeue(env, log, se.delay, "snoozed")
	case errors.Is(err, ErrPermanent):
		w.record(env, start, jobq.OutcomeFailure, err)
		return w.deadLetter(env, log, err, elapsed)
	default:
		w.record(env, start, jobq.OutcomeFailure, err)
		return w.fail(env, log, err, elapsed)
	}
	return false
}

// complete settles a task whose handler succeeded, and reports whether it
// was completed. The event follows the settler's flush of the completion,
// so a durable one is stored.
func (w *Worker) complete(env *jobq.Envelope, log *slog.Logger, elapsed time.Duration) bool {
	if cerr := w.settle(env, log, env.Complete); cerr != nil {
		// The work is done but the message stays, and runs again, unless
		// it was removed meanwhile.
		msg := "task succeeded but could not be completed; it will be delivered again"
		switch {
		case hooks.MaybeApplied(cerr):
			msg = "task succeeded, and its completion is unknown: " + unsettledNote(cerr)
		case errors.Is(cerr, errcode.LockLost):
			msg = "task succeeded but could not be completed: its lease is no longer held; it runs again unless it was removed meanwhile (cleared, purged or cancelled)"
		}
		log.Error(msg, "error", cerr, "elapsed", elapsed)
		w.unsettled.Add(1)
		w.emit(Event{Task: env.Task, Outcome: Completed, SettleErr: cerr, Elapsed: elapsed})
		if errcode.Of(cerr) == errcode.PermissionDenied && !hooks.MaybeApplied(cerr) {
			// No task this worker runs can be completed: each would run
			// again after every lease, without end.
			ferr := fmt.Errorf("completing tasks: %w (tasks that succeed cannot be completed, so they would run again after every lease; give the worker's credentials the rights to settle tasks)", cerr)
			log.Error("stopping the worker", "error", ferr)
			w.stopFatal("completion refused", ferr)
		}
		return false
	}
	w.done.Add(1)
	if log.Enabled(context.Background(), w.taskLevel()) {
		log.Log(context.Background(), w.taskLevel(), "task done", "elapsed", elapsed)
	}
	w.emit(Event{Task: env.Task, Outcome: Completed, Durable: true, Elapsed: elapsed})
	return true
}

// deadLetter settles a permanent failure: to the dead letters at once,
// whatever the retry budget. It reports whether the task was dead-lettered.
func (w *Worker) deadLetter(env *jobq.Envelope, log *slog.Logger, err error, elapsed time.Duration) bool {
	w.failed.Add(1)
	derr := w.settle(env, log, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, settleTimeout)
		defer cancel()
		return env.DeadLetter(ctx, err.Error(), detailOf(err))
	})
	if derr != nil {
		log.Error("task failed permanently and could not be dead-lettered; "+unsettledNote(derr),
			"error", err, "settle_error", derr, "elapsed", elapsed)
		w.emit(Event{Task: env.Task, Outcome: DeadLettered, Err: err, SettleErr: derr, Elapsed: elapsed})
		return false
	}
	w.dead.Add(1)
	log.Error("task failed permanently (no retries): moved to the dead letters", "error", err, "elapsed", elapsed)
	w.emit(Event{Task: env.Task, Outcome: DeadLettered, Durable: true, Err: err, Elapsed: elapsed})
	return true
}

// fail settles a failed attempt through the retry budget, and reports
// whether the task was dead-lettered.
func (w *Worker) fail(env *jobq.Envelope, log *slog.Logger, err error, elapsed time.Duration) (ended bool) {
	w.failed.Add(1)
	var res jobq.FailResult
	ferr := w.settle(env, log, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, settleTimeout)
		defer cancel()
		var err2 error
		res, err2 = env.Fail(ctx, err, detailOf(err))
		return err2
	})
	ev := Event{Task: env.Task, Outcome: DeadLettered, Durable: ferr == nil, Err: err, SettleErr: ferr, Elapsed: elapsed}
	switch {
	case ferr != nil:
		log.Error("task failed and could not be settled; "+unsettledNote(ferr),
			"error", err, "settle_error", ferr, "elapsed", elapsed)
		if env.RetriesLeft() > 0 {
			ev.Outcome = Retried
		}
	case res.Retried:
		log.Warn("task failed; requeued for a retry", "error", err, "retries_left", res.RetriesLeft, "elapsed", elapsed)
		ev.Outcome, ev.RetriesLeft = Retried, res.RetriesLeft
	default:
		w.dead.Add(1)
		log.Error("task failed; no retries left: moved to the dead letters", "error", err, "elapsed", elapsed)
		ended = true
	}
	w.emit(ev)
	return ended
}

// requeue puts a task back without touching its retry budget.
func (w *Worker) requeue(env *jobq.Envelope, log *slog.Logger, delay time.Duration, why string) {
	err := w.settle(env, log, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, settleTimeout)
		defer cancel()
		return env.Requeue(ctx, delay)
	})
	if err != nil {
		log.Error("could not requeue the task; "+unsettledNote(err), "why", why, "error", err,
			"lease_expires", env.Expiry())
		w.emit(Event{Task: env.Task, Outcome: Requeued, Err: errors.New(why), SettleErr: err})
		return
	}
	w.requeued.Add(1)
	log.Log(context.Background(), w.taskLevel(), "task requeued", "why", why, "delay", delay)
	w.emit(Event{Task: env.Task, Outcome: Requeued, Durable: true, Err: errors.New(why)})
}

// gateStops runs env's gate command, if it has one, and reports whether
// the task stops there (requeued: the gate failed, or the worker stopped
// during the check) and whether it was put back unrun (a gate miss).
func (w *Worker) gateStops(ctx context.Context, env *jobq.Envelope, log *slog.Logger, began time.Time, letGo func()) (stop, putBack bool) {
	cmd := env.Task.GateCmd
	if cmd == "" || w.gate.check(ctx, cmd, log) {
		w.gate.pass()
		return false, false
	}
	if ctx.Err() != nil {
		w.record(env, began, jobq.OutcomeRequeued, errStopping)
		letGo()
		w.requeue(env, log, 0, "worker stopping during the gate check")
		return true, false
	}
	w.record(env, began, jobq.OutcomeGateMiss, errors.New("gate command failed: "+cmd))
	letGo()
	w.requeue(env, log, w.o.Gate.RequeueDelay, "gate failed on this worker")
	if w.gate.miss(env.Task.ID) {
		w.log.Info("this worker cannot run anything on the queue: its gate checks failed too many times in a row; exiting",
			"gate_misses", w.o.Gate.MaxNotQualified)
		w.end("gate not qualified")
		w.Drain()
	}
	return true, true
}

// renewal is how long the heartbeat waits before renewing: half the
// visibility, or half the time the lease has left when that is shorter,
// because some backends lease for their own duration whatever visibility
// was asked for (Service Bus locks for the queue's lock duration).
func (w *Worker) renewal(env *jobq.Envelope) time.Duration {
	d := w.o.Visibility / 2
	if left := time.Until(env.Expiry()) / 2; left > 0 && left < d {
		d = left
	}
	return d
}

// envMember is how a kwargs object's "env" member starts.
var envMember = []byte(`"env"`)

// shownPayload is a task's payload as logs and errors show it: the values
// of the secret-looking variables in its "env" member masked (a kwargs
// line without "cmd" is a payload task). Payloads without one are shown as
// they are, unparsed.
func shownPayload(p []byte) string {
	if bytes.Contains(p, envMember) {
		p = envmask.Kwargs(p)
	}
	return string(p)
}

// describe is a task's kind and command or payload, shortened for a log
// line.
func describe(t *jobq.Task) string {
	s := t.Command
	if s == "" {
		s = shownPayload(t.Payload)
	}
	if t.Kind != "" {
		s = t.Kind + " " + s
	}
	return truncateStr(s, 120)
}
