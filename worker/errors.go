package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// ErrTooManyFailures is returned by Run when more tasks failed in a row than
// Options.MaxConsecutiveFailures allows. The CLI exits with status 1.
var ErrTooManyFailures = errors.New("too many consecutive task failures")

// ErrPreempted is returned by Run when a preemption notice
// (Options.Preemption) stopped the worker: the machine is going away, and
// the tasks that were running have been requeued. The CLI exits with
// status 3.
var ErrPreempted = errors.New("preempted: the machine is being taken away")

// TaskError is a failed attempt with detail for the dead-letter store. A
// Handler may return one to keep, say, the tail of a command's output beside
// the dead letter; any other error is used as the reason alone.
type TaskError struct {
	// Err is the reason, kept as the dead letter's reason.
	Err error
	// Detail is longer context, kept as the dead letter's detail.
	Detail string
	// ExitCode is the command's exit status, when it exited with one; it
	// goes into the message's attempt history.
	ExitCode *int
}

// Error implements error.
func (e *TaskError) Error() string { return e.Err.Error() }

// Unwrap returns the reason.
func (e *TaskError) Unwrap() error { return e.Err }

// endedBeforeStop marks a handler's failure that was decided before its
// task's context ended: a shell command that exited before a stop or its
// time limit that came while its background processes still held the
// output. The task is settled by that failure, not by the stop.
type endedBeforeStop struct{ error }

// Unwrap returns the failure.
func (e endedBeforeStop) Unwrap() error { return e.error }

// settlingCause is the cause by which a task whose handler returned err is
// settled: its context's cause, or nil when err was decided before the
// worker's stop or the time limit (endedBeforeStop). A cancel and a lost
// lease still count.
func settlingCause(err, cause error) error {
	if cause == nil || !errors.Is(cause, errStopping) && !errors.Is(cause, ErrTimeLimit) {
		return cause // without a cause, eb below is never allocated
	}
	if eb := (endedBeforeStop{}); errors.As(err, &eb) {
		return nil
	}
	return cause
}

// errStopping is the cause with which a task's context is cancelled when the
// worker stops (errcode.LockLost when its lease is lost); the worker settles
// differently for each. errLeaseLost and errDraining end a task that waited
// for a handler.
var (
	errLeaseLost = errors.New("lease lost: another worker may hold the task now")
	errStopping  = errors.New("worker stopping: the task will be requeued")
	errDraining  = errors.New("worker draining before the task started: it is requeued")
)

// handle runs the handler on job, turning a panic into a failed attempt
// (a *TaskError whose detail is the stack), so that one bad task does not
// take the process and the other tasks it holds down with it.
func (w *Worker) handle(ctx context.Context, job *Job, log *slog.Logger) (err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := string(debug.Stack())
			log.Error("handler panicked: the attempt counts as failed", "panic", fmt.Sprint(r), "stack", stack)
			err = &TaskError{Err: fmt.Errorf("handler panicked: %v", r), Detail: stack}
		}
	}()
	return w.h.Handle(ctx, job)
}

func detailOf(err error) string {
	var te *TaskError
	if errors.As(err, &te) {
		return te.Detail
	}
	return ""
}

func tooMany(n, max int) error {
	return fmt.Errorf("%w: %d task attempts failed in a row (a retry is an attempt), more than the allowed %d (raise --max-consecutive-failures, or fix the tasks; the failed ones were retried or dead-lettered)", ErrTooManyFailures, n, max)
}

// ErrPermanent matches (with errors.Is) the errors made by Permanent.
var ErrPermanent = errors.New("permanent failure")

// ErrUnknownKind matches (with errors.Is) the failure of a task that a Mux
// has no handler for. It is permanent: the task is dead-lettered at once.
var ErrUnknownKind = errors.New("unknown task kind")

// Permanent marks err as a failure that retrying cannot fix (bad input, a
// payload that does not decode): when a Handler returns it, the worker
// dead-letters the task at once, whatever its retry budget, with err as the
// reason. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }
