// Package errcode classifies jobq errors, whichever backend produced them.
//
// Every error a jobq operation returns carries a Code. Test it with Of, or
// with errors.Is against a code, which matches every error of that code:
//
//	if errcode.Of(err) == errcode.LockLost { ... }
//	if errors.Is(err, errcode.LockLost) { ... }
//
// Both the portable package jobq and the driver contract use these codes;
// drivers map their engine's errors onto them.
package errcode

import (
	"context"
	"errors"
	"fmt"
)

// Code classifies an error so that callers can react to it without knowing
// which backend produced it. A Code is also an error, so that
// errors.Is(err, errcode.LockLost) matches every error of code LockLost.
type Code int

// The error codes. Drivers must map their engine's errors onto these through
// Driver.ErrorCode; anything they cannot classify is Unknown.
const (
	// Unknown is an error the driver could not classify.
	Unknown Code = iota
	// NotFound: the queue, message or dead letter does not exist.
	NotFound
	// AlreadyExists: the thing being created exists already.
	AlreadyExists
	// InvalidArgument: the caller passed a value the operation cannot accept.
	InvalidArgument
	// LockLost: the lease (lock, pop receipt, lease token) on a received
	// message is no longer held by this receiver: it expired, another receiver
	// claimed the message, or it was settled already. The message was not
	// changed by the failed call.
	LockLost
	// TooLarge: the message exceeds the backend's size limit.
	TooLarge
	// Unimplemented: the backend cannot perform the operation, and no safe
	// fallback exists.
	Unimplemented
	// FailedPrecondition: the system is not in a state where the operation
	// can run (for example the queue is closed).
	FailedPrecondition
	// ResourceExhausted: a quota or bound was reached (throttling, max depth).
	ResourceExhausted
	// Canceled: the context was canceled.
	Canceled
	// DeadlineExceeded: the context deadline passed.
	DeadlineExceeded
	// Unavailable: the engine could not be reached; the call may be retried.
	Unavailable
	// Internal: an invariant was broken inside the engine or driver.
	Internal
	// PermissionDenied: the credentials do not allow the operation.
	PermissionDenied
)

var codeNames = map[Code]string{
	Unknown:            "Unknown",
	NotFound:           "NotFound",
	AlreadyExists:      "AlreadyExists",
	InvalidArgument:    "InvalidArgument",
	LockLost:           "LockLost",
	TooLarge:           "TooLarge",
	Unimplemented:      "Unimplemented",
	FailedPrecondition: "FailedPrecondition",
	ResourceExhausted:  "ResourceExhausted",
	Canceled:           "Canceled",
	DeadlineExceeded:   "DeadlineExceeded",
	Unavailable:        "Unavailable",
	Internal:           "Internal",
	PermissionDenied:   "PermissionDenied",
}

// String returns the code's name, for example "LockLost".
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error makes a Code an error, so that it can be the target of errors.Is.
// It returns the same text as String, so that a Code prints the same
// whether fmt takes it for an error or a Stringer.
func (c Code) Error() string { return c.String() }

// Coder is implemented by errors that carry a Code: jobq's *Error and the
// driver package's *Error.
type Coder interface {
	ErrorCode() Code
}

// Of returns err's code: the code of the first error in its chain that
// carries one, Canceled or DeadlineExceeded for context errors, Unknown
// otherwise (and for nil).
func Of(err error) Code {
	var c Coder
	switch {
	case err == nil:
		return Unknown
	case errors.As(err, &c):
		return c.ErrorCode()
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return Unknown
}

// Matches reports whether target is a Code equal to code. Error types that
// carry a code call it from their Is method.
func Matches(code Code, target error) bool {
	c, ok := target.(Code)
	return ok && c == code
}

// ErrorCode returns c, so that a Code returned as an error has itself as
// its code.
func (c Code) ErrorCode() Code { return c }
