package jobq_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// TestSentinelsMatchDriverErrors: errors.Is with a jobq sentinel works on a
// driver error that reached the caller directly (an escape hatch), even
// wrapped, and only for its own code.
func TestSentinelsMatchDriverErrors(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("pushing: %w", driver.Errorf(driver.ResourceExhausted, "queue is full"))
	tests := []struct {
		sentinel error
		want     bool
	}{
		{jobq.ErrResourceExhausted, true},
		{jobq.ErrLockLost, false},
		{jobq.ErrNotFound, false},
	}
	for _, tt := range tests {
		if got := errors.Is(err, tt.sentinel); got != tt.want {
			t.Errorf("errors.Is(%v, %v) = %v; want %v", err, tt.sentinel, got, tt.want)
		}
	}
}
