package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/hooks"
)

// beginCheckpoint restores env's checkpoint before its task starts, when
// the worker keeps checkpoints (nil, true when it does not). When the
// checkpoint cannot be read it requeues the task, which should not start
// over while its checkpoint may be there, and returns false.
func (w *Worker) beginCheckpoint(ctx context.Context, env *jobq.Envelope, log *slog.Logger, began time.Time, letGo func()) (*taskCheckpoint, bool) {
	if w.ckpt == nil {
		return nil, true
	}
	tc, err := w.ckpt.begin(ctx, env, log)
	if err == nil {
		return tc, true
	}
	why := "its checkpoint could not be read"
	delay := checkpointRetryDelay
	if ctx.Err() != nil {
		why, delay = "worker stopping while the checkpoint was read", 0
	} else {
		log.Warn("could not read the task's checkpoint: the task is put back to run later rather than start over (no retry used)",
			"error", err, "delay", delay)
	}
	w.record(env, began, jobq.OutcomeRequeued, err)
	letGo()
	w.requeue(env, log, delay, why)
	return nil, false
}

// recordStop notes an attempt that the worker stopped (a signal, its time
// limit, a preemption notice): preempted when a notice stopped the worker,
// with the work it lost and the work its checkpoints saved, which the
// worker also adds to its totals.
func (w *Worker) recordStop(env *jobq.Envelope, start time.Time, tc *taskCheckpoint) {
	end := time.Now()
	lost, saved := tc.account(start, end)
	a := jobq.Attempt{Worker: w.o.WorkerID, Host: w.host, Env: w.o.EnvLabel, Start: start, End: end,
		Outcome: jobq.OutcomeRequeued, Detail: errStopping.Error(), Lost: lost, Saved: saved}
	if n := w.preempted(); n != nil {
		a.Outcome, a.Detail = jobq.OutcomePreempted, "preempted: "+n.String()
		w.preemptions.Add(1)
	}
	w.workLost.Add(int64(lost))
	w.workSaved.Add(int64(saved))
	hooks.RecordAttempt(env, a)
}

// WorkTotals are a worker's running totals of task time (see
// Worker.WorkTotals).
type WorkTotals struct {
	// Done is the time handlers ran, over all attempts.
	Done time.Duration
	// Lost is the work of stopped attempts that no checkpoint kept: for
	// each, the time since its last checkpoint (or its start).
	Lost time.Duration
	// Saved is the work of stopped attempts that their checkpoints kept
	// for the next attempt.
	Saved time.Duration
	// Preemptions counts the attempts stopped by a preemption notice.
	Preemptions int64
}

// WorkTotals returns the worker's totals of work done, lost to stops and
// saved by checkpoints; the registry carries them (jobq.WorkerInfo).
func (w *Worker) WorkTotals() WorkTotals {
	return WorkTotals{Done: time.Duration(w.workDone.Load()), Lost: time.Duration(w.workLost.Load()),
		Saved: time.Duration(w.workSaved.Load()), Preemptions: w.preemptions.Load()}
}
