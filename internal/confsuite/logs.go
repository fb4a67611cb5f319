package confsuite

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// degradedMsg is the message of the portable layer's one-time warning.
const degradedMsg = "jobq: feature degraded on this backend"

// record is one captured log record, its attributes flattened to strings.
type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", r.level, r.msg)
	for k, v := range r.attrs {
		fmt.Fprintf(&b, " %s=%q", k, v)
	}
	return b.String()
}

// logStore collects the records of one queue handle's logger.
type logStore struct {
	mu   sync.Mutex
	recs []record
}

func (s *logStore) all() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.recs...)
}

// warnings returns the degradation warnings logged for feature f.
func (s *logStore) warnings(f string) []record {
	var out []record
	for _, r := range s.all() {
		if r.level == slog.LevelWarn && r.msg == degradedMsg && r.attrs["feature"] == f {
			out = append(out, r)
		}
	}
	return out
}

// find returns the records at level or above whose message contains sub.
func (s *logStore) find(level slog.Level, sub string) []record {
	var out []record
	for _, r := range s.all() {
		if r.level >= level && strings.Contains(r.msg, sub) {
			out = append(out, r)
		}
	}
	return out
}

// captureHandler is a slog.Handler that stores records in a logStore.
type captureHandler struct {
	store *logStore
	attrs []slog.Attr
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.store.mu.Lock()
	h.store.recs = append(h.store.recs, rec)
	h.store.mu.Unlock()
	return nil
}

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &captureHandler{store: h.store, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

// WithGroup keeps the records flat: the suite looks attributes up by key.
func (h *captureHandler) WithGroup(string) slog.Handler { return h }
