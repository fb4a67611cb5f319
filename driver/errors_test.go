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
)

func TestCodeOfHTTPStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		want   driver.Code
	}{
		{http.StatusUnauthorized, driver.PermissionDenied},
		{http.StatusForbidden, driver.PermissionDenied},
		{http.StatusNotFound, driver.NotFound},
		{http.StatusTooManyRequests, driver.ResourceExhausted},
		{http.StatusInternalServerError, driver.Unavailable},
		{http.StatusServiceUnavailable, driver.Unavailable},
		{http.StatusConflict, driver.Unknown},
		{http.StatusBadRequest, driver.Unknown},
		{http.StatusOK, driver.Unknown},
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
		code driver.Code
		want driver.Applied
	}{
		{"nil", nil, driver.Unknown, driver.NotApplied},
		// Refusals by the engine stored nothing.
		{"invalid argument", errors.New("bad"), driver.InvalidArgument, driver.NotApplied},
		{"too large", errors.New("big"), driver.TooLarge, driver.NotApplied},
		{"permission denied", errors.New("403"), driver.PermissionDenied, driver.NotApplied},
		{"queue not found", errors.New("404"), driver.NotFound, driver.NotApplied},
		{"already exists", errors.New("409"), driver.AlreadyExists, driver.NotApplied},
		{"failed precondition", errors.New("closed"), driver.FailedPrecondition, driver.NotApplied},
		{"throttled or full", errors.New("503 ServerBusy"), driver.ResourceExhausted, driver.NotApplied},
		{"unimplemented", errors.New("no"), driver.Unimplemented, driver.NotApplied},
		{"lock lost", errors.New("receipt"), driver.LockLost, driver.NotApplied},
		// A request that never left.
		{"connection refused", refused, driver.Unavailable, driver.NotApplied},
		{"name lookup failed", &net.DNSError{Err: "no such host", Name: "x"}, driver.Unavailable, driver.NotApplied},
		{"wrapped dial error", fmt.Errorf("push: %w", refused), driver.Unknown, driver.NotApplied},
		// A lost answer, or one the driver could not classify.
		{"connection reset", reset, driver.Unavailable, driver.MaybeApplied},
		{"deadline mid-request", context.DeadlineExceeded, driver.DeadlineExceeded, driver.MaybeApplied},
		{"canceled mid-request", context.Canceled, driver.Canceled, driver.MaybeApplied},
		{"internal", errors.New("oops"), driver.Internal, driver.MaybeApplied},
		{"unclassified", errors.New("?"), driver.Unknown, driver.MaybeApplied},
		// The driver's mark decides over the code.
		{"marked maybe over a refusal code", &driver.Error{Code: driver.ResourceExhausted, Applied: driver.MaybeApplied},
			driver.ResourceExhausted, driver.MaybeApplied},
		{"marked not applied over a lost answer", &driver.Error{Code: driver.Unavailable, Applied: driver.NotApplied, Err: reset},
			driver.Unavailable, driver.NotApplied},
		{"mark under a wrapper", fmt.Errorf("push: %w", &driver.Error{Code: driver.Unavailable, Applied: driver.MaybeApplied, Err: refused}),
			driver.Unavailable, driver.MaybeApplied},
		{"mark in a joined error", errors.Join(errors.New("a"), &driver.Error{Code: driver.NotFound, Applied: driver.MaybeApplied}),
			driver.NotFound, driver.MaybeApplied},
		{"unmarked driver error falls to its code", &driver.Error{Code: driver.Unavailable, Err: reset},
			driver.Unavailable, driver.MaybeApplied},
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
