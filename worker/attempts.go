package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/hooks"
)

// defaultWorkerID names this process in attempt histories: host and PID.
func defaultWorkerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// record notes how this delivery of env ended, for the message's attempt
// history (stored by the settlement that follows).
func (w *Worker) record(env *jobq.Envelope, start time.Time, outcome jobq.AttemptOutcome, err error) {
	w.recordInto(new(jobq.Attempt), env, start, outcome, err)
}

// recordInto is record with a, which the envelope keeps until its
// settlement, as the attempt's storage: a task's own (taskRun.attempt)
// costs no allocation.
func (w *Worker) recordInto(a *jobq.Attempt, env *jobq.Envelope, start time.Time, outcome jobq.AttemptOutcome, err error) {
	*a = jobq.Attempt{Worker: w.o.WorkerID, Host: w.host, Env: w.o.EnvLabel, Start: start, End: time.Now(), Outcome: outcome}
	if err != nil {
		a.Detail = err.Error()
		var te *TaskError
		if errors.As(err, &te) {
			a.ExitCode = te.ExitCode
		}
		if se, ok := snoozeOf(err); ok {
			a.ExitCode = se.exitCode
		}
	}
	hooks.RecordAttempt(env, a)
}

// reportLost logs the earlier deliveries of env that ended without a
// settlement (the worker running them died or hung, or the task outlasted
// its lease), and returns how many in a row there were.
func (w *Worker) reportLost(env *jobq.Envelope, log *slog.Logger) int {
	lost := hooks.LostDeliveries(env)
	if len(lost) == 0 {
		return 0
	}
	// The lost worker could not record itself; the last recorded attempt
	// names the worker before it, when there is one.
	args := []any{"lost_deliveries", lost, "delivery", env.DeliveryCount}
	if as := env.Task.Attempts; len(as) > 0 && as[len(as)-1].Worker != "" {
		args = append(args, "last_recorded_worker", as[len(as)-1].Worker)
	}
	log.Warn("earlier deliveries ended without a settlement: their lease expired (the worker died or hung, or the task outlasted its lease)", args...)
	return len(lost)
}

// lostTooOften logs env's earlier deliveries in a row that lost their
// lease (reportLost), and returns how many and whether they reach
// Options.MaxLostLeases.
func (w *Worker) lostTooOften(env *jobq.Envelope, log *slog.Logger) (int, bool) {
	n := w.reportLost(env, log)
	return n, w.o.MaxLostLeases > 0 && n >= w.o.MaxLostLeases
}

// errLostLeases is the dead-letter reason of a task whose lease expired on
// n deliveries in a row (Options.MaxLostLeases).
func errLostLeases(n int) error {
	return fmt.Errorf("its lease expired on %d deliveries in a row (the task may crash or hang its worker, or outlast its lease: "+
		"without heartbeats, lease it for longer than it runs); requeue it from the dead letters once that is fixed", n)
}
