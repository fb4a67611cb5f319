package worker

import (
	"testing"
	"time"
)

func TestCPUPercent(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration, cpu time.Duration) usage { return usage{at: t0.Add(d), cpu: cpu} }
	tests := []struct {
		name      string
		prev, cur usage
		ncpu      int
		want      float64
	}{
		{"first reading", usage{}, at(time.Second, 10*time.Millisecond), 2, 0},
		{"one tick over 7.5 ms is not 134%", at(0, 0), at(7500*time.Microsecond, 10*time.Millisecond), 2, 0},
		{"half a core over 10 s", at(0, time.Second), at(10*time.Second, 6*time.Second), 2, 50},
		{"two busy cores", at(0, 0), at(time.Second, 2*time.Second), 2, 200},
		{"capped at the cores there are", at(0, 0), at(time.Second, 3*time.Second), 2, 200},
		{"clock went backwards", at(time.Second, 0), at(0, time.Second), 2, 0},
		{"CPU time went backwards", at(0, time.Second), at(2*time.Second, 0), 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := cpuPercent(tt.prev, tt.cur, tt.ncpu); got != tt.want {
				t.Errorf("cpuPercent = %v, want %v", got, tt.want)
			}
		})
	}
}
