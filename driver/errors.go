package driver

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// Error is an error with a code, for drivers that want to classify an error
// at the point where it is made rather than in ErrorCode. Driver.ErrorCode
// implementations should start with errcode.Of, which understands this type.
type Error struct {
	Code errcode.Code
	Msg  string
	Err  error // the engine's error, if any
	// Applied says whether the failed call may still have changed the
	// engine; the zero value leaves it to the code (see AppliedOf).
	Applied Applied
}

// Errorf returns an *Error with the given code and a formatted message. If the
// arguments include an error wrapped with %w, it becomes Err.
func Errorf(code errcode.Code, format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Code: code, Msg: wrapped.Error(), Err: errors.Unwrap(wrapped)}
}

// Error implements error. Credentials in the text (an SDK's request URL
// with its SAS, a connection string) are replaced with "xxxxx".
func (e *Error) Error() string {
	if e.Msg != "" {
		return redact.String(e.Msg)
	}
	if e.Err != nil {
		return redact.String(e.Err.Error())
	}
	return e.Code.String()
}

// Unwrap returns the engine's error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns e.Code, so that errcode.Of finds it.
func (e *Error) ErrorCode() errcode.Code { return e.Code }

// Is reports whether target is e's code, so that errors.Is(err,
// errcode.LockLost) works on driver errors that reach users without passing
// through the portable layer (escape hatches such as the Postgres backend's
// PushTx).
func (e *Error) Is(target error) bool { return errcode.Matches(e.Code, target) }

// CodeOfHTTPStatus is the code an HTTP status means to every backend that
// speaks HTTP: 401 and 403 PermissionDenied, 404 NotFound, 429
// ResourceExhausted, 5xx Unavailable; Unknown for the rest, which a backend
// maps itself (409 means different things to different services).
func CodeOfHTTPStatus(status int) errcode.Code {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return errcode.PermissionDenied
	case status == http.StatusNotFound:
		return errcode.NotFound
	case status == http.StatusTooManyRequests:
		return errcode.ResourceExhausted
	case status >= 500:
		return errcode.Unavailable
	}
	return errcode.Unknown
}

// Applied says whether a call that failed may still have changed the
// engine. A write whose request reached the engine but whose answer was
// lost (a connection reset after the request was sent, a timeout while
// waiting for the reply, a server error after the request was read) may
// have been applied; the caller cannot tell, and at-least-once delivery
// resolves the doubt towards a duplicate, never a loss.
type Applied int

// The answers of Applied.
const (
	// AppliedUnsaid: the error does not say; AppliedOf decides from its
	// code.
	AppliedUnsaid Applied = iota
	// NotApplied: the engine refused the call, or never received it.
	NotApplied
	// MaybeApplied: the call may have been applied; its answer was lost.
	MaybeApplied
)

// String returns the answer's name, for example "MaybeApplied".
func (a Applied) String() string {
	switch a {
	case AppliedUnsaid:
		return "AppliedUnsaid"
	case NotApplied:
		return "NotApplied"
	case MaybeApplied:
		return "MaybeApplied"
	}
	return fmt.Sprintf("Applied(%d)", int(a))
}

// AppliedOf says whether the call that failed with err, classified as code
// (by Driver.ErrorCode), may have been applied. In this order:
//
//   - an *Error in err's chain whose Applied is set decides (a driver
//     marks an error it knows more about, such as one whose SDK retried a
//     request after a lost answer);
//   - a connection that could not be made (Unsent) is NotApplied;
//   - an answer refusing the call is NotApplied: the codes
//     InvalidArgument, TooLarge, PermissionDenied, NotFound,
//     AlreadyExists, FailedPrecondition, ResourceExhausted,
//     Unimplemented and LockLost;
//   - anything else may have been applied: Unavailable, DeadlineExceeded,
//     Canceled (the request may have been sent before the context ended),
//     Internal and Unknown.
//
// A nil err is NotApplied.
func AppliedOf(err error, code errcode.Code) Applied {
	if err == nil {
		return NotApplied
	}
	if a := markedApplied(err); a != AppliedUnsaid {
		return a
	}
	if Unsent(err) {
		return NotApplied
	}
	switch code {
	case errcode.InvalidArgument, errcode.TooLarge, errcode.PermissionDenied, errcode.NotFound, errcode.AlreadyExists,
		errcode.FailedPrecondition, errcode.ResourceExhausted, errcode.Unimplemented, errcode.LockLost:
		return NotApplied
	}
	return MaybeApplied
}

// markedApplied returns the first Applied set by an *Error in err's
// chain, following every branch of a joined error.
func markedApplied(err error) Applied {
	for err != nil {
		if de, ok := err.(*Error); ok && de.Applied != AppliedUnsaid {
			return de.Applied
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if a := markedApplied(e); a != AppliedUnsaid {
					return a
				}
			}
			return AppliedUnsaid
		default:
			return AppliedUnsaid
		}
	}
	return AppliedUnsaid
}

// Unsent reports whether err shows that a request never left: the
// connection to the engine could not be made (a refused connection, a
// failed name lookup, a dial timeout). Such a request cannot have been
// applied.
func Unsent(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	var de *net.DNSError
	return errors.As(err, &de)
}
