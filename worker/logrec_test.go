package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// logRecorder is a slog handler that keeps the messages logged at Info and
// above, so a test can wait for one or count them.
type logRecorder struct {
	mu      sync.Mutex
	msgs    []string
	changed chan struct{} // closed and replaced when a message is added
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{})} }

func (r *logRecorder) logger() *slog.Logger { return slog.New(r) }

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// count returns how many messages contain s.
func (r *logRecorder) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// waitFor blocks until a message containing s has been logged.
func (r *logRecorder) waitFor(s string) {
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if r.count(s) > 0 {
			return
		}
		<-ch
	}
}
