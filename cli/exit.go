package cli

import (
	"errors"
	"fmt"
)

// Exit codes of the jobq command.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitFailure: a task or the worker failed, or the backend did.
	ExitFailure = 1
	// ExitUsage: the command line or the configuration is wrong (an unknown
	// flag, an invalid duration, an unknown queue scheme, an invalid
	// JOBQ_* variable).
	ExitUsage = 2
)

// exitError carries the exit code for an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError is an error that exits with ExitUsage.
func usageError(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// asUsage marks err as a usage or configuration error.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitUsage, err: err}
}

// failure is an error that exits with ExitFailure.
func failure(err error) error {
	return &exitError{code: ExitFailure, err: err}
}

// exitCode picks the exit code for an error returned by a command.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitFailure
}
