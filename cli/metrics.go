package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/jobq/jobq/internal/promtext"
)

// metricsPath is where the worker's --metrics-addr endpoint serves.
const metricsPath = "/metrics"

// checkMetricsAddr checks a --metrics-addr: host:port, on a loopback
// address unless public says the user means to expose it.
func checkMetricsAddr(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return usageError("--metrics-addr %q: give host:port, such as 127.0.0.1:9464", addr)
	}
	if public || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usageError("--metrics-addr %s is not a loopback address: the endpoint has no authentication, so anyone who reaches it reads the queue's metrics; use 127.0.0.1:%s, or add --metrics-public to serve on %s anyway", addr, port, addr)
}

// metricsServer serves the meter provider's metrics in Prometheus text
// format at metricsPath.
type metricsServer struct {
	srv *http.Server
	ln  net.Listener
}

// serveMetrics listens on addr and serves reader's metrics until stop.
func serveMetrics(addr string, reader *sdkmetric.ManualReader, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError("--metrics-addr %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+metricsPath, promtext.Handler(reader, func(err error) {
		log.Debug("metrics endpoint", "error", err)
	}))
	s := &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "error", err)
		}
	}()
	log.Info("serving Prometheus metrics", "url", "http://"+ln.Addr().String()+metricsPath)
	return s, nil
}

// stop closes the endpoint.
func (s *metricsServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
