// Package dashboard is the web UI of `jobq QUEUE dashboard`: an HTTP server
// that samples one queue's counts into a bounded in-memory history and
// serves a page (embedded; nothing is fetched from elsewhere) with plots of
// the counts, throughput and failures, task runtimes, workers, dead letters
// (with requeue and purge) and per-key policies, and the JSON API behind it.
//
// It is safe by default: New refuses a non-loopback address without a
// token; every request is checked for the token (when one is set) and for
// a Host the server answers to; mutating requests must be POSTs from the
// page itself (a CSRF token and a same-origin check); the queue's URL is
// shown redacted and dead-letter text passes through redact.String.
package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/redact"
)

// Defaults of Config.
const (
	// DefaultInterval is how often the dashboard reads the queue's counts.
	DefaultInterval = 5 * time.Second
	// DefaultHistory is how many samples it keeps: an hour at the default
	// interval.
	DefaultHistory = 720
)

// Worker is one worker as the dashboard shows it.
type Worker struct {
	ID         string    `json:"id"`
	Host       string    `json:"host"`
	PID        int       `json:"pid"`
	Version    string    `json:"version,omitempty"`
	State      string    `json:"state"`
	Started    time.Time `json:"started"`
	Heartbeat  time.Time `json:"heartbeat"`
	Tasks      []string  `json:"tasks"`
	Done       int64     `json:"done"`
	Failed     int64     `json:"failed"`
	CPUPercent float64   `json:"cpu_percent"`
	RSSBytes   int64     `json:"rss_bytes"`
}

// WorkerSource lists a queue's registered workers (live, vanished and
// recently withdrawn). An error with code errcode.Unimplemented means the
// backend keeps no worker registry.
type WorkerSource func(ctx context.Context) ([]Worker, error)

// Config configures a dashboard Server.
type Config struct {
	// Queue is the queue to show. Required.
	Queue *jobq.Queue
	// Addr is the listen address, host:port. A host that is not a loopback
	// address (127.0.0.0/8, ::1, localhost) needs Token.
	Addr string
	// Token, when set, must accompany every request: as the header
	// "Authorization: Bearer TOKEN", or once as ?token=TOKEN (the page then
	// keeps it in a same-site cookie).
	Token string
	// Interval is how often the counts are sampled; DefaultInterval when
	// zero.
	Interval time.Duration
	// History is how many samples are kept; DefaultHistory when zero.
	History int
	// Workers lists the workers; nil shows "not available on this backend".
	Workers WorkerSource
	// Logger receives errors of the sampler; slog.Default() when nil.
	Logger *slog.Logger
}

// Server is a dashboard for one queue.
type Server struct {
	cfg     Config
	q       *jobq.Queue
	log     *slog.Logger
	history *ring
	csrf    string
	mux     *http.ServeMux
	results *resultTracker
	hist    reportCache[historyReport]
	work    reportCache[workReport]
	rates   groupRates
}

// New checks cfg and builds a Server. It fails with a message naming the fix
// when the address is not loopback and there is no token.
func New(cfg Config) (*Server, error) {
	if cfg.Queue == nil {
		return nil, errors.New("dashboard: no queue given")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interval < 100*time.Millisecond {
		return nil, fmt.Errorf("dashboard: sample interval %v is too short; use at least 100ms", cfg.Interval)
	}
	if cfg.History == 0 {
		cfg.History = DefaultHistory
	}
	if cfg.History < 2 || cfg.History > 1_000_000 {
		return nil, fmt.Errorf("dashboard: history of %d samples is out of range; keep between 2 and 1000000", cfg.History)
	}
	loop, err := isLoopbackAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}
	if !loop && cfg.Token == "" {
		return nil, fmt.Errorf("dashboard: address %q is reachable from other machines; give a token (--token or $JOBQ_DASHBOARD_TOKEN) or listen on 127.0.0.1", cfg.Addr)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, q: cfg.Queue, log: log, history: newRing(cfg.History), csrf: randomToken(), results: newResultTracker()}
	s.routes()
	return s, nil
}

// randomToken is 128 random bits in hex.
func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// isLoopbackAddr reports whether the host of addr (host:port) is a loopback
// address or "localhost"; an empty host (every interface) is not.
func isLoopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("dashboard: address %q is not host:port (for example 127.0.0.1:8080): %w", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// Handler returns the dashboard's HTTP handler, with every check applied.
func (s *Server) Handler() http.Handler { return s.guard(s.mux) }

// Sample reads the counts once and adds them to the history.
func (s *Server) Sample(ctx context.Context) error {
	st, err := s.q.Admin().Stats(ctx)
	if err != nil {
		return err
	}
	s.history.add(Sample{At: time.Now(), Stats: st})
	return nil
}

// Run samples the queue every interval until ctx ends: the counts, and
// the result records of tasks it saw queued (where the backend keeps
// them). A failed sample is logged (redacted) and skipped.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if err := s.Sample(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("dashboard: could not read the queue's counts", "error", redact.String(err.Error()))
		}
		s.followResults(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Serve samples the queue and serves the dashboard on ln until ctx ends,
// then shuts the server down.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// net/http's own complaints (a bad TLS handshake, a handler's error)
	// go to the dashboard's logger, not to the standard log package.
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.Run(ctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("dashboard: shutting down: %w", err)
	}
	return nil
}
