package worker

import (
	"testing"
	"time"
)

// TestHandlerPaceTurnsFast: the mean is a moving average, and the channel
// from state is closed exactly when the mean crosses under the bar.
func TestHandlerPaceTurnsFast(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name      string
		durations []time.Duration
		wantFast  bool
		wantTurn  bool // the channel taken before the durations is closed
	}{
		{"no task yet", nil, false, false},
		{"one fast task", []time.Duration{ms}, true, true},
		{"one slow task", []time.Duration{time.Second}, false, false},
		{"slow, then fast until the mean drops", []time.Duration{400 * ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms}, true, true},
		{"slow, then too few fast", []time.Duration{400 * ms, ms, ms}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newHandlerPace()
			_, turned := p.state()
			for _, d := range tt.durations {
				p.observe(d)
			}
			fast, _ := p.state()
			if fast != tt.wantFast {
				t.Errorf("fast = %v after %v; want %v (mean %v)", fast, tt.durations, tt.wantFast, p.mean)
			}
			select {
			case <-turned:
				if !tt.wantTurn {
					t.Error("turned closed; want open")
				}
			default:
				if tt.wantTurn {
					t.Error("turned open; want closed")
				}
			}
		})
	}
}
