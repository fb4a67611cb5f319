package driver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/jobq/jobq/errcode"
)

// Error is an error with a code, for drivers that want to classify an error
// at the point where it is made rather than in ErrorCode. Driver.ErrorCode
// implementations should start with CodeOf, which understands this type.
type Error struct {
	Code errcode.Code
	Msg  string
	Err  error // the engine's error, if any
}

// Errorf returns an *Error with the given code and a formatted message. If the
// arguments include an error wrapped with %w, it becomes Err.
func Errorf(code errcode.Code, format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Code: code, Msg: wrapped.Error(), Err: errors.Unwrap(wrapped)}
}

// Error implements error.
func (e *Error) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	if e.Err != nil {
		return e.Err.Error()
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
