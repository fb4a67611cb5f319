package worker

import (
	"context"
	"log/slog"
)

// taskLogger returns l with the task's id attached to every record, as
// l.With("task", id) would. With builds the attribute, and a text or JSON
// handler formats it, for every task whether or not anything is logged
// about it; taskHandler does that work only for a record that is logged.
func taskLogger(l *slog.Logger, id string) *slog.Logger {
	// One allocation for the handler and the logger together: slog.New's
	// own does not escape, since its result is copied.
	return new(taskLog).init(l, id)
}

// init makes t the logger taskLogger returns, and returns it; the worker
// keeps a task's in the task's own state (taskRun).
func (t *taskLog) init(l *slog.Logger, id string) *slog.Logger {
	t.h = taskHandler{inner: l.Handler(), id: id}
	t.l = *slog.New(&t.h)
	return &t.l
}

// taskLog holds a task's logger and its handler.
type taskLog struct {
	h taskHandler
	l slog.Logger
}

// taskHandler is taskLogger's handler: inner with the task attribute put
// first in each record it handles.
type taskHandler struct {
	inner slog.Handler
	id    string
}

func (h *taskHandler) attr() slog.Attr { return slog.String("task", h.id) }

// Enabled implements slog.Handler.
func (h *taskHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle implements slog.Handler: the task attribute comes before the
// record's own, where With would have put it.
func (h *taskHandler) Handle(ctx context.Context, r slog.Record) error {
	nr := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	nr.AddAttrs(h.attr())
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(a)
		return true
	})
	return h.inner.Handle(ctx, nr)
}

// WithAttrs implements slog.Handler. Attributes added later follow the
// task's, so from here on it is the plain With.
func (h *taskHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	return h.inner.WithAttrs(append([]slog.Attr{h.attr()}, as...))
}

// WithGroup implements slog.Handler: the task attribute stays outside the
// group, as it would after With.
func (h *taskHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.inner.WithAttrs([]slog.Attr{h.attr()}).WithGroup(name)
}
