package worker

import (
	"testing"
	"time"
)

func TestFailurePauserSequence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      FailureBackoff
		outcomes []bool // true: success
		want     []time.Duration
	}{
		{"off", FailureBackoff{}, []bool{false, false}, []time.Duration{0, 0}},
		{"doubles to the cap", FailureBackoff{Base: time.Second, Max: 5 * time.Second},
			[]bool{false, false, false, false, false}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"success resets", FailureBackoff{Base: time.Second, Max: time.Minute},
			[]bool{false, false, true, false}, []time.Duration{time.Second, 2 * time.Second, 0, time.Second}},
		{"cap below base", FailureBackoff{Base: time.Second, Max: time.Millisecond},
			[]bool{false, false}, []time.Duration{time.Second, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newFailurePauser(tt.cfg)
			for i, ok := range tt.outcomes {
				if got := p.record(ok); got != tt.want[i] {
					t.Errorf("outcome %d (success=%v): pause %v, want %v", i+1, ok, got, tt.want[i])
				}
			}
		})
	}
}
