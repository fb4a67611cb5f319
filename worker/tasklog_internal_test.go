package worker

import (
	"bytes"
	"log/slog"
	"testing"
)

// TestTaskLoggerWritesWhatWithWrites: for every way a handler uses its
// logger, taskLogger's output is byte for byte that of With("task", id).
func TestTaskLoggerWritesWhatWithWrites(t *testing.T) {
	t.Parallel()
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	handlers := map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: noTime})
		},
		"json": func(b *bytes.Buffer) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: noTime})
		},
	}
	bases := map[string]func(*slog.Logger) *slog.Logger{
		"plain":      func(l *slog.Logger) *slog.Logger { return l },
		"with attrs": func(l *slog.Logger) *slog.Logger { return l.With("worker", "w1") },
		"in a group": func(l *slog.Logger) *slog.Logger { return l.WithGroup("jobq").With("worker", "w1") },
	}
	uses := map[string]func(*slog.Logger){
		"info":          func(l *slog.Logger) { l.Info("task started", "delivery", 2) },
		"no attrs":      func(l *slog.Logger) { l.Warn("lease lost") },
		"below level":   func(l *slog.Logger) { l.Debug("lease renewed", "expiry", 1) },
		"with":          func(l *slog.Logger) { l.With("attempt", 3).Error("failed", "err", "boom") },
		"with nothing":  func(l *slog.Logger) { l.With().Info("same logger") },
		"group":         func(l *slog.Logger) { l.WithGroup("shell").Info("output", "line", "hello") },
		"empty group":   func(l *slog.Logger) { l.WithGroup("").Info("no group", "k", "v") },
		"group in with": func(l *slog.Logger) { l.With("a", 1).WithGroup("g").With("b", 2).Info("nested", "c", 3) },
		"group attr":    func(l *slog.Logger) { l.Info("grouped", slog.Group("limits", "cpu", 2)) },
	}
	for hname, newHandler := range handlers {
		for bname, base := range bases {
			for uname, use := range uses {
				var want, got bytes.Buffer
				use(base(slog.New(newHandler(&want))).With("task", "0123abcd"))
				use(taskLogger(base(slog.New(newHandler(&got))), "0123abcd"))
				if got.String() != want.String() {
					t.Errorf("%s handler, %s logger, %s:\n got %q\nwant %q", hname, bname, uname, got.String(), want.String())
				}
			}
		}
	}
}
