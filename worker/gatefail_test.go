package worker_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/worker"
)

// TestGateFailureNamesOutputOnlyWhenThereIsSome: a failed gate's error,
// which the worker logs, ends with the gate's output tail when it printed
// something, and with the exit status when it printed nothing.
func TestGateFailureNamesOutputOnlyWhenThereIsSome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, gate, want string
	}{
		{"silent", "exit 3", "gate command exit status 3"},
		{"printed", "echo no GPU free >&2; exit 3", "gate command exit status 3; output tail: no GPU free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := worker.RunGate(context.Background(), tt.gate, nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("gate %q: error %v; want %q", tt.gate, err, tt.want)
			}
		})
	}
}
