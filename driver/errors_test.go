package driver_test

import (
	"net/http"
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
