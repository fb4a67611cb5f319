package jobq

import (
	"fmt"

	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// Error is the error type every jobq operation returns. Test its code with
// errcode.Of(err) or errors.Is(err, errcode.LockLost); reach the backend's
// own error with errors.As or Unwrap.
type Error struct {
	// Code classifies the error.
	Code errcode.Code
	// Op is the operation, for example "push" or "complete".
	Op string
	// Queue is the queue's redacted URL, when known.
	Queue string
	// Msg says what went wrong and, where there is one, how to fix it.
	Msg string
	// Err is the underlying error.
	Err error
	// MaybeApplied is true when the operation may have taken effect
	// although it failed: its request reached the engine and the answer
	// was lost (a connection reset after the request was sent, a timeout
	// while waiting for the reply). A push error with MaybeApplied leaves
	// the task's outcome unknown: it may be queued, perhaps more than
	// once; one without it stored nothing. A settlement error with it (a
	// Complete whose context ended while the completion was under way)
	// may have settled the message: settling it again then fails with
	// LockLost. Other writes set it the same way (a renewal, a dead letter
	// requeued or purged, a policy, pause or schedule changed, a cancel, a
	// clear): the change may have been made, which reading the state back
	// tells. See docs/reliability.md.
	MaybeApplied bool
}

// Error implements error.
func (e *Error) Error() string {
	s := "jobq"
	if e.Op != "" {
		s += " " + e.Op
	}
	if e.Queue != "" {
		s += " " + e.Queue
	}
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		msg = e.Code.String()
	}
	if e.MaybeApplied {
		msg += " (outcome unknown: the answer was lost, and the " + e.op() + " may have taken effect)"
	}
	// Drivers and SDKs may quote a URL or a connection string.
	return redact.String(s + ": " + msg)
}

// op names the operation in messages.
func (e *Error) op() string {
	if e.Op == "" {
		return "operation"
	}
	return e.Op
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns e.Code, so that errcode.Of finds it.
func (e *Error) ErrorCode() errcode.Code { return e.Code }

// Is reports whether target is e's code, so that errors.Is(err,
// errcode.LockLost) works for every LockLost error.
func (e *Error) Is(target error) bool { return errcode.Matches(e.Code, target) }

// errClosed is returned by operations on a closed Queue. It has code
// FailedPrecondition.
var errClosed = &Error{Code: errcode.FailedPrecondition, Msg: "queue is closed"}

// errorf makes an *Error without an underlying error.
func errorf(code errcode.Code, op, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Msg: fmt.Sprintf(format, args...)}
}
