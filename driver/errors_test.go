package driver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func TestCodeOfHTTPStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		want   errcode.Code
	}{
		{http.StatusUnauthorized, errcode.PermissionDenied},
		{http.StatusForbidden, errcode.PermissionDenied},
		{http.StatusNotFound, errcode.NotFound},
		{http.StatusTooManyRequests, errcode.ResourceExhausted},
		{http.StatusInternalServerError, errcode.Unavailable},
		{http.StatusServiceUnavailable, errcode.Unavailable},
		{http.StatusConflict, errcode.Unknown},
		{http.StatusBadRequest, errcode.Unknown},
		{http.StatusOK, errcode.Unknown},
	}
	for _, tt := range tests {
		if got := driver.CodeOfHTTPStatus(tt.status); got != tt.want {
			t.Errorf("CodeOfHTTPStatus(%d) = %v; want %v", tt.status, got, tt.want)
		}
	}
}

func TestAppliedOf(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name string
		err  error
		code errcode.Code
		want driver.Applied
	}{
		{"nil", nil, errcode.Unknown, driver.NotApplied},
		// Refusals by the engine stored nothing.
		{"invalid argument", errors.New("bad"), errcode.InvalidArgument, driver.NotApplied},
		{"too large", errors.New("big"), errcode.TooLarge, driver.NotApplied},
		{"permission denied", errors.New("403"), errcode.PermissionDenied, driver.NotApplied},
		{"queue not found", errors.New("404"), errcode.NotFound, driver.NotApplied},
		{"already exists", errors.New("409"), errcode.AlreadyExists, driver.NotApplied},
		{"failed precondition", errors.New("closed"), errcode.FailedPrecondition, driver.NotApplied},
		{"throttled or full", errors.New("503 ServerBusy"), errcode.ResourceExhausted, driver.NotApplied},
		{"unimplemented", errors.New("no"), errcode.Unimplemented, driver.NotApplied},
		{"lock lost", errors.New("receipt"), errcode.LockLost, driver.NotApplied},
		// A request that never left.
		{"connection refused", refused, errcode.Unavailable, driver.NotApplied},
		{"name lookup failed", &net.DNSError{Err: "no such host", Name: "x"}, errcode.Unavailable, driver.NotApplied},
		{"wrapped dial error", fmt.Errorf("push: %w", refused), errcode.Unknown, driver.NotApplied},
		// A lost answer, or one the driver could not classify.
		{"connection reset", reset, errcode.Unavailable, driver.MaybeApplied},
		{"deadline mid-request", context.DeadlineExceeded, errcode.DeadlineExceeded, driver.MaybeApplied},
		{"canceled mid-request", context.Canceled, errcode.Canceled, driver.MaybeApplied},
		{"internal", errors.New("oops"), errcode.Internal, driver.MaybeApplied},
		{"unclassified", errors.New("?"), errcode.Unknown, driver.MaybeApplied},
		// The driver's mark decides over the code.
		{"marked maybe over a refusal code", &driver.Error{Code: errcode.ResourceExhausted, Applied: driver.MaybeApplied},
			errcode.ResourceExhausted, driver.MaybeApplied},
		{"marked not applied over a lost answer", &driver.Error{Code: errcode.Unavailable, Applied: driver.NotApplied, Err: reset},
			errcode.Unavailable, driver.NotApplied},
		{"mark under a wrapper", fmt.Errorf("push: %w", &driver.Error{Code: errcode.Unavailable, Applied: driver.MaybeApplied, Err: refused}),
			errcode.Unavailable, driver.MaybeApplied},
		{"mark in a joined error", errors.Join(errors.New("a"), &driver.Error{Code: errcode.NotFound, Applied: driver.MaybeApplied}),
			errcode.NotFound, driver.MaybeApplied},
		{"unmarked driver error falls to its code", &driver.Error{Code: errcode.Unavailable, Err: reset},
			errcode.Unavailable, driver.MaybeApplied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := driver.AppliedOf(tt.err, tt.code); got != tt.want {
				t.Errorf("AppliedOf(%v, %v) = %v; want %v", tt.err, tt.code, got, tt.want)
			}
		})
	}
}
