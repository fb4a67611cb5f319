package otelcheck_test

import (
	"context"
	"crypto/rand"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/internal/hooks"
)

// TestGlobalProviderInstalledLater: a queue opened before the program
// installs a global tracer provider records through it once it is there
// (the queue skips spans only while none is installed). Not parallel: it
// sets the process's global provider.
func TestGlobalProviderInstalledLater(t *testing.T) {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://global-"+rand.Text())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "before"}); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)
	if _, err := q.Push(ctx, &jobq.Task{Command: "after"}); err != nil {
		t.Fatal(err)
	}
	env, err := q.Receive(ctx, jobq.ReceiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hooks.ProducerSpanContext(env).IsValid() {
		t.Errorf("the task pushed before any provider was installed carries a trace context %v", hooks.ProducerSpanContext(env))
	}
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	want := []string{"push " + q.Name(), "receive " + q.Name()}
	if len(names) != len(want) || names[0] != want[0] || names[1] != want[1] {
		t.Errorf("spans %v; want %v (the second push and the receive)", names, want)
	}
}
