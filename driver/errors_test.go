package driver_test

import (
	"net/http"
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
