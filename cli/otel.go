package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq"
)

// telemetry is the CLI's OpenTelemetry SDK: the providers it passes to the
// queue (never the process-wide globals), built from the standard OTEL_*
// variables and, for the worker, the --metrics-addr reader. Nil providers
// leave the queue on OpenTelemetry's no-ops.
type telemetry struct {
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
}

// otelEnv is the environment the telemetry is configured from.
type otelEnv func(string) string

// wants says which signals the OTEL_* variables ask to export over OTLP:
// OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER set to otlp, or, when they
// are unset, an OTLP endpoint for the signal. OTEL_SDK_DISABLED=true turns
// both off.
func (env otelEnv) wants() (traces, metrics bool, err error) {
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return false, false, nil
	}
	endpoint := env("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	pick := func(exporterVar, endpointVar string) (bool, error) {
		switch v := strings.TrimSpace(env(exporterVar)); v {
		case "":
			return endpoint || env(endpointVar) != "", nil
		case "otlp":
			return true, nil
		case "none":
			return false, nil
		default:
			return false, usageError("$%s=%s is not supported: jobq exports with otlp (over HTTP) or none; for Prometheus use the worker's --metrics-addr", exporterVar, v)
		}
	}
	if traces, err = pick("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); err != nil {
		return false, false, err
	}
	if metrics, err = pick("OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"); err != nil {
		return false, false, err
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"} {
		switch p := env(v); p {
		case "", "http/protobuf":
		default:
			return false, false, usageError("$%s=%s is not supported: this jobq exports OTLP over HTTP only; set it to http/protobuf and point the endpoint at the collector's HTTP port (4318)", v, p)
		}
	}
	return traces, metrics, nil
}

// startTelemetry builds the providers the environment asks for, plus a
// meter provider for the extra reader (the worker's --metrics-addr) when
// there is one. Exporters start lazily: nothing is sent before the first
// span ends or the first export interval passes.
func startTelemetry(ctx context.Context, env otelEnv, extra sdkmetric.Reader) (*telemetry, error) {
	traces, metrics, err := env.wants()
	if err != nil {
		return nil, err
	}
	t := &telemetry{}
	if !traces && !metrics && extra == nil {
		return t, nil
	}
	// service.name defaults to jobq; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override it.
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("jobq")), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, usageError("$OTEL_RESOURCE_ATTRIBUTES: %v", err)
	}
	if traces {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, usageError("OpenTelemetry trace exporter (check the OTEL_EXPORTER_OTLP_* variables): %v", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	}
	var readers []sdkmetric.Option
	if metrics {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, usageError("OpenTelemetry metric exporter (check the OTEL_EXPORTER_OTLP_* variables): %v", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if extra != nil {
		readers = append(readers, sdkmetric.WithReader(extra))
	}
	if len(readers) > 0 {
		t.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
	}
	return t, nil
}

// options fills the queue options' providers.
func (t *telemetry) options(o *jobq.Options) {
	if t == nil {
		return
	}
	if t.tp != nil {
		o.TracerProvider = trace.TracerProvider(t.tp)
	}
	if t.mp != nil {
		o.MeterProvider = metric.MeterProvider(t.mp)
	}
}

// telemetryShutdown bounds the final export when the command ends.
const telemetryShutdown = 5 * time.Second

// shutdown exports what is buffered and stops the providers.
func (t *telemetry) shutdown() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), telemetryShutdown)
	defer cancel()
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("OpenTelemetry export at exit: %w", err)
	}
	return nil
}

// setupTelemetry starts the telemetry once, before the queue opens.
func (a *app) setupTelemetry(ctx context.Context) error {
	if a.tel != nil {
		return nil
	}
	routeOTelDiagnostics(a.log)
	var extra sdkmetric.Reader // nil, not a nil *ManualReader
	if a.metricsReader != nil {
		extra = a.metricsReader
	}
	t, err := startTelemetry(ctx, os.Getenv, extra)
	if err != nil {
		return err
	}
	a.tel = t
	return nil
}

// routeOTelDiagnostics sends OpenTelemetry's own diagnostics (a malformed
// $OTEL_EXPORTER_OTLP_HEADERS, a failed export) to the command's log,
// which redacts, instead of the standard logger it prints them with by
// default. They are process-wide, as the command's log is (slog.Default).
func routeOTelDiagnostics(log *slog.Logger) {
	otel.SetLogger(logr.New(otelLogSink{log}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry reported an error", "error", err)
	}))
}

// otelLogSink is OpenTelemetry's internal logger over the command's log.
// It keeps the message and the error and drops the key-values, which may
// quote a header from $OTEL_EXPORTER_OTLP_HEADERS whole, credential
// included ("value"="Basic ...").
type otelLogSink struct{ log *slog.Logger }

func (otelLogSink) Init(logr.RuntimeInfo) {}

// Enabled passes warnings (V(1)) and more severe lines, as OpenTelemetry's
// default logger does not: its Info and Debug are V(4) and V(8).
func (otelLogSink) Enabled(level int) bool { return level <= 1 }

func (s otelLogSink) Info(_ int, msg string, _ ...any) { s.log.Warn("OpenTelemetry: " + msg) }

func (s otelLogSink) Error(err error, msg string, _ ...any) {
	s.log.Warn("OpenTelemetry: "+msg+" (check the OTEL_* variables)", "error", err)
}

func (s otelLogSink) WithValues(...any) logr.LogSink { return s }

func (s otelLogSink) WithName(string) logr.LogSink { return s }
