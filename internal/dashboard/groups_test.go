package dashboard

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestGroupRate: a group's rate is its ends over the last minute of
// readings, the average since its first push on the first reading, and
// unknown before any task ended.
func TestGroupRate(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	created := t0.Add(-100 * time.Second)
	reading := func(ended int64, updated time.Time) *driver.GroupCounters {
		return &driver.GroupCounters{Name: "g", Pushed: 1000, Succeeded: ended, Created: created, Updated: updated}
	}
	tests := []struct {
		name     string
		readings []int64 // ended at each reading, 10 s apart
		want     float64 // the last reading's rate
		ok       bool
	}{
		{"first reading: average since the first push", []int64{200}, 2, true},
		{"nothing ended yet", []int64{0}, 0, false},
		{"over the readings", []int64{200, 250, 300}, 5, true},
		{"no progress since the first reading", []int64{200, 200}, 0, false},
		{"older readings drop out after a minute", []int64{0, 0, 0, 0, 0, 0, 0, 70, 140, 210}, 70.0 / 10 * 3 / 6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r groupRates
			var got float64
			var ok bool
			for i, ended := range tt.readings {
				at := t0.Add(time.Duration(i) * 10 * time.Second)
				got, ok = r.rate(reading(ended, at), at)
			}
			if ok != tt.ok || (ok && (got < tt.want*0.999 || got > tt.want*1.001)) {
				t.Errorf("rate = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
