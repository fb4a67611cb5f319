package cli

import (
	"strings"
	"testing"
)

// TestOtelEnv: which signals the OTEL_* variables turn on, and the clear
// errors for what this build cannot export.
func TestOtelEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		env             map[string]string
		traces, metrics bool
		wantErr         string
	}{
		{"nothing set", nil, false, false, ""},
		{"an endpoint turns both on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, true, ""},
		{"a traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, false, ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_METRICS_EXPORTER": "none"}, true, false, ""},
		{"exporter otlp alone", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, false, ""},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, false, "OTEL_TRACES_EXPORTER=zipkin is not supported"},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, false, "http/protobuf"},
		{"http/protobuf", map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, false, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := otelEnv(func(k string) string { return tt.env[k] })
			traces, metrics, err := env.wants()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || traces != tt.traces || metrics != tt.metrics {
				t.Fatalf("traces %v metrics %v error %v; want %v %v", traces, metrics, err, tt.traces, tt.metrics)
			}
		})
	}
}
