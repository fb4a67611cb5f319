package main_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandWithExtraBackend builds a jobq command that adds a backend
// (testdata/withtoy, the program docs/drivers.md describes) and checks
// that its CLI knows the added scheme beside the built-in ones and opens
// queues with it.
func TestCommandWithExtraBackend(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "withtoy")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./testdata/withtoy").CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/withtoy: %v\n%s", err, out)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"backends"}, []string{"toy", "sqlite", "postgres"}},
		{[]string{"toy://work", "push", "-c", "echo hello"}, nil},
		// A mem queue lives in its process: a new one starts empty.
		{[]string{"toy://work", "size"}, []string{"0\n"}},
	}
	for _, tt := range tests {
		out, err := exec.CommandContext(t.Context(), bin, tt.args...).CombinedOutput()
		if err != nil {
			t.Errorf("withtoy %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("withtoy %s printed %q; want it to mention %q", strings.Join(tt.args, " "), out, w)
			}
		}
	}
}
