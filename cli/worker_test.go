package cli

import (
	"strings"
	"testing"
)

// TestSetPrefetch: --prefetch 0 means none (-1 in worker.Options, where 0
// is the default), a positive count passes through, a negative one is a
// usage error that names the flag.
func TestSetPrefetch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flag    int
		want    int
		wantErr string
	}{
		{0, -1, ""},
		{1, 1, ""},
		{48, 48, ""},
		{-1, 0, "--prefetch is -1"},
	}
	for _, tt := range tests {
		var f workerFlags
		err := f.setPrefetch(tt.flag)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("setPrefetch(%d) = %v; want an error naming %q", tt.flag, err, tt.wantErr)
			}
			continue
		}
		if err != nil || f.prefetch != tt.want {
			t.Errorf("setPrefetch(%d): prefetch %d, error %v; want %d", tt.flag, f.prefetch, err, tt.want)
		}
	}
}
