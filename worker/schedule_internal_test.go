package worker

import (
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestSchedulePassPause: the background loop's pause after a pass.
func TestSchedulePassPause(t *testing.T) {
	t.Parallel()
	const r = driver.ScheduleRefresh
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name          string
		pass          schedulePass
		idle, maxWait time.Duration
		wait, next    time.Duration
	}{
		{"nothing to watch doubles", schedulePass{}, r, 30 * time.Second, 2 * r, 2 * r},
		{"up to maxWait", schedulePass{}, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second},
		{"maxWait under the refresh keeps the refresh", schedulePass{}, r, time.Second, r, r},
		{"held tasks keep the refresh", schedulePass{held: 1}, 16 * time.Second, 30 * time.Second, r, r},
		{"a pass that acted", schedulePass{acted: true}, 16 * time.Second, 30 * time.Second, r, r},
		{"a failure retries at the refresh", schedulePass{err: errors.New("x")}, 16 * time.Second, 30 * time.Second, r, r},
		{"a slot sooner than the idle pause", schedulePass{next: now.Add(5 * time.Second)}, 16 * time.Second, 30 * time.Second, 5 * time.Second, 30 * time.Second},
		{"a slot later than it", schedulePass{next: now.Add(time.Hour)}, 4 * time.Second, 30 * time.Second, 8 * time.Second, 8 * time.Second},
		{"a slot due now waits the refresh", schedulePass{next: now}, 16 * time.Second, 30 * time.Second, r, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wait, next := tt.pass.pause(tt.idle, tt.maxWait, now)
			if wait != tt.wait || next != tt.next {
				t.Errorf("pause(%v, %v) = %v, %v; want %v, %v", tt.idle, tt.maxWait, wait, next, tt.wait, tt.next)
			}
		})
	}
}
