package benchkit

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/promtext"
)

// scrapeInterval is how often the benchmark scrapes its metrics endpoint:
// far more often than a Prometheus server would (15 s to a minute), so the
// figure bounds the endpoint's cost from above.
const scrapeInterval = time.Second

// withMetrics sets up what $JOBQ_BENCH_METRICS asks for: "prometheus"
// installs an OpenTelemetry SDK meter provider on the queue, serves it as
// the worker's --metrics-addr does, on loopback, and scrapes it every
// scrapeInterval while the benchmark runs. Unset, the queue keeps
// OpenTelemetry's no-op providers (nothing installed).
func withMetrics(b *testing.B, opts *jobq.Options) {
	b.Helper()
	switch mode := os.Getenv("JOBQ_BENCH_METRICS"); mode {
	case "":
		return
	case "prometheus":
	default:
		b.Fatalf("JOBQ_BENCH_METRICS=%s: use prometheus, or leave it unset", mode)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	opts.MeterProvider = mp
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: promtext.Handler(reader, nil), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(scrapeInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if resp, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			case <-stop:
				return
			}
		}
	}()
	b.Cleanup(func() {
		close(stop)
		<-done
		_ = srv.Close()
		_ = mp.Shutdown(context.Background())
	})
}
