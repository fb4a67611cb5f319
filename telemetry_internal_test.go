package jobq

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TestUnsetGlobal: the queue recognises OpenTelemetry's own global tracer
// provider (none installed; this test binary installs none) and nothing
// else, so that an OpenTelemetry release renaming it fails here rather than
// making every task pay for spans nobody records.
func TestUnsetGlobal(t *testing.T) {
	t.Parallel()
	if !unsetGlobal(otel.GetTracerProvider()) {
		t.Errorf("the global tracer provider %T is not recognised as unset", otel.GetTracerProvider())
	}
	sdk := sdktrace.NewTracerProvider()
	defer sdk.Shutdown(t.Context())
	if unsetGlobal(sdk) {
		t.Error("an SDK tracer provider is taken for the unset global")
	}
	if unsetGlobal(noop.NewTracerProvider()) {
		t.Error("a no-op tracer provider passed in Options is taken for the unset global")
	}
}
