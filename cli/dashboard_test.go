package cli_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestDashboardRefusesUnsafeSettings checks the dashboard's usage errors:
// a public address without a token above all.
func TestDashboardRefusesUnsafeSettings(t *testing.T) {
	t.Setenv("JOBQ_DASHBOARD_TOKEN", "")
	q := sqliteQueue(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"public without token", []string{"--addr", "0.0.0.0:0"}, "give a token"},
		{"every interface without token", []string{"--addr", ":0"}, "give a token"},
		{"not host:port", []string{"--addr", "8080"}, "not host:port"},
		{"interval too short", []string{"--interval", "1ms"}, "--interval"},
		{"history too small", []string{"--history", "1"}, "--history"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{q, "dashboard"}, tt.args...)...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 saying %q", code, out, errOut, tt.wantErr)
			}
		})
	}
}
