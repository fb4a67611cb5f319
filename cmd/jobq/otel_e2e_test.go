package main_test

import (
	"strings"
	"testing"
)

// TestOTelDiagnosticsRedacted: OpenTelemetry's own complaints about a
// malformed $OTEL_EXPORTER_OTLP_HEADERS, and its failed exports, are lines
// of jobq's log, without the header's credential; by default
// OpenTelemetry printed them with the standard logger, the header value
// included.
func TestOTelDiagnosticsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "S3CRETtok"
	for _, tc := range []struct{ name, headers, want string }{
		{"value that does not unescape", "Authorization=Basic " + secret + "%zz", "escape header value"},
		{"header without '='", "Authorization Bearer " + secret, "parse headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBench(t)
			r := b.runWith("", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_HEADERS=" + tc.headers}, "-q", "push", "-c", "echo hi")
			if r.code != 0 {
				t.Fatalf("push exited %d: %s", r.code, r.stderr)
			}
			if strings.Contains(r.stderr, secret) {
				t.Errorf("the header's credential was printed:\n%s", r.stderr)
			}
			if !strings.Contains(r.stderr, "OpenTelemetry: "+tc.want) {
				t.Errorf("no %q warning in jobq's log:\n%s", tc.want, r.stderr)
			}
			for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if !strings.HasPrefix(line, "time=") {
					t.Errorf("a line outside jobq's log format: %q", line)
				}
			}
		})
	}
}
