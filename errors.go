package jobq

import (
	"errors"
	"fmt"

	"github.com/jobq/jobq/driver"
)

// Code classifies an error; see the constants. Get one with ErrorCode.
type Code = driver.Code

// Error codes, re-exported from the driver package.
const (
	Unknown            = driver.Unknown
	NotFound           = driver.NotFound
	AlreadyExists      = driver.AlreadyExists
	InvalidArgument    = driver.InvalidArgument
	LockLost           = driver.LockLost
	TooLarge           = driver.TooLarge
	Unimplemented      = driver.Unimplemented
	FailedPrecondition = driver.FailedPrecondition
	ResourceExhausted  = driver.ResourceExhausted
	Canceled           = driver.Canceled
	DeadlineExceeded   = driver.DeadlineExceeded
	Unavailable        = driver.Unavailable
	Internal           = driver.Internal
	PermissionDenied   = driver.PermissionDenied
)

// Error is the error type every jobq operation returns. Test its code with
// errors.Is against the sentinels below (errors.Is(err, jobq.ErrLockLost)) or
// with ErrorCode; reach the backend's own error with errors.As or Unwrap.
type Error struct {
	// Code classifies the error.
	Code Code
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
	// once; one without it stored nothing. See docs/reliability.md.
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
	return Redact(s + ": " + msg)
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

// Is reports whether target is a sentinel with the same code, so that
// errors.Is(err, ErrLockLost) works for every LockLost error.
func (e *Error) Is(target error) bool {
	var s *sentinel
	if errors.As(target, &s) {
		return s.code == e.Code
	}
	return false
}

type sentinel struct{ code Code }

func (s *sentinel) Error() string { return "jobq: " + s.code.String() }

// ErrorCode returns the code the sentinel stands for; driver.Error matches
// sentinels through it.
func (s *sentinel) ErrorCode() Code { return s.code }

// Sentinels for errors.Is. Each matches every *Error with its code.
var (
	ErrNotFound           error = &sentinel{NotFound}
	ErrAlreadyExists      error = &sentinel{AlreadyExists}
	ErrInvalidArgument    error = &sentinel{InvalidArgument}
	ErrLockLost           error = &sentinel{LockLost}
	ErrTooLarge           error = &sentinel{TooLarge}
	ErrUnimplemented      error = &sentinel{Unimplemented}
	ErrFailedPrecondition error = &sentinel{FailedPrecondition}
	ErrResourceExhausted  error = &sentinel{ResourceExhausted}
	ErrUnavailable        error = &sentinel{Unavailable}
)

// ErrClosed is returned by operations on a closed Queue. It has code
// FailedPrecondition.
var ErrClosed = &Error{Code: FailedPrecondition, Msg: "queue is closed"}

// ErrorCode returns err's code: the code of the first *Error in its chain,
// Canceled or DeadlineExceeded for context errors, Unknown otherwise.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return driver.CodeOf(err)
}

// errorf makes an *Error without an underlying error.
func errorf(code Code, op, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Msg: fmt.Sprintf(format, args...)}
}
