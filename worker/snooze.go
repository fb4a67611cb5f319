package worker

import (
	"errors"
	"fmt"
	"time"
)

// ExitSnooze is the exit status with which a shell task snoozes: it asks to
// run again after Shell.SnoozeDelay (the CLI's --snooze-delay), as a Go
// handler does by returning Snooze. It is EX_TEMPFAIL of sysexits.h.
const ExitSnooze = 75

// ErrSnoozed matches (with errors.Is) the errors made by Snooze.
var ErrSnoozed = errors.New("snoozed")

// Snooze tells the worker that the task cannot run yet ("not yet, come back
// in d"): a Handler that returns it has its task requeued to be delivered
// again after d, without spending a retry and without counting as a
// failure; the attempt history records the attempt as snoozed. Where the
// backend cannot delay a requeue the fallback it declares applies (see
// `jobq backends`).
func Snooze(d time.Duration) error {
	return &snoozeError{delay: max(d, 0)}
}

type snoozeError struct {
	delay    time.Duration
	exitCode *int // a shell task's ExitSnooze, for its attempt history
}

func (e *snoozeError) Error() string        { return fmt.Sprintf("snoozed for %v", e.delay) }
func (e *snoozeError) Is(target error) bool { return target == ErrSnoozed }

// snoozeOf returns the snooze err asks for, if it is one.
func snoozeOf(err error) (*snoozeError, bool) {
	var se *snoozeError
	ok := errors.As(err, &se)
	return se, ok
}
