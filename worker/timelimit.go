package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq"
)

// ErrTimeLimit matches (with errors.Is) the cause of a task's context when
// the task ran past its time limit (Task.TimeLimit, else
// Options.TaskTimeLimit), and the failure recorded for it. A Go handler
// sees it as context.Cause(ctx).
var ErrTimeLimit = errors.New("task time limit exceeded")

// timeLimitError is the cause of a task stopped at its time limit; its text
// goes into the attempt history.
type timeLimitError struct{ limit time.Duration }

func (e *timeLimitError) Error() string        { return fmt.Sprintf("time limit %v exceeded", e.limit) }
func (e *timeLimitError) Is(target error) bool { return target == ErrTimeLimit }

// timeLimit is how long one attempt at t may run: its own limit, else the
// worker's; zero for none.
func (w *Worker) timeLimit(t *jobq.Task) time.Duration {
	if t.TimeLimit > 0 {
		return t.TimeLimit
	}
	return max(w.o.TaskTimeLimit, 0)
}

// withTimeLimit returns ctx bounded by t's time limit, with a cause
// matching ErrTimeLimit, and the function that releases it.
func (w *Worker) withTimeLimit(ctx context.Context, t *jobq.Task) (context.Context, context.CancelFunc) {
	limit := w.timeLimit(t)
	if limit <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, limit, &timeLimitError{limit: limit})
}

// stoppedBy is the handler's error err, made to say why its task was
// stopped when its context ended at the time limit (cause): a handler that
// returned only ctx's error failed at its time limit. A handler that
// returned nil succeeded, whenever it returned.
func stoppedBy(err, cause error) error {
	if err == nil || !errors.Is(cause, ErrTimeLimit) || errors.Is(err, ErrTimeLimit) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return cause
	}
	return fmt.Errorf("%w: %w", cause, err)
}
