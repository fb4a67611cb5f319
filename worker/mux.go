package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jobq/jobq"
)

// Mux routes each task to the handler registered for its Task.Kind, so one
// worker can run several kinds of job. Register handlers with Handle,
// HandleJSON, HandleResult, HandleJSONResult and HandleShell before the
// worker runs, then give the worker Mux.Handler():
//
//	mux := worker.NewMux()
//	worker.HandleJSON(mux, "resize", func(ctx context.Context, task *jobq.Task, p ResizeArgs) error { ... })
//	mux.Handle("report", reportHandler)
//	mux.HandleShell(&worker.Shell{})
//	err := worker.Run(ctx, q, mux.Handler(), worker.Options{})
//
// A task whose kind has no handler, a task without a kind that is not a
// shell task, and a shell task on a Mux without a shell handler fail
// permanently: the worker dead-letters them at once, without retries, with a
// reason that names the kind and the kinds the Mux knows.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
	shell    Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: map[string]Handler{}} }

// Handle registers h for tasks whose Kind is kind. It panics if kind is
// empty, h is nil or kind already has a handler, as these are mistakes in
// the program, not in its input.
func (m *Mux) Handle(kind string, h Handler) {
	switch {
	case kind == "":
		panic("worker: Mux.Handle with an empty kind; shell tasks (which have none) go to Mux.HandleShell")
	case h == nil:
		panic("worker: Mux.Handle(" + strconv.Quote(kind) + ") with a nil handler")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.handlers[kind]; dup {
		panic("worker: Mux.Handle: kind " + strconv.Quote(kind) + " already has a handler")
	}
	m.handlers[kind] = h
}

// HandleShell registers h for shell tasks: tasks without a Kind whose
// Command is set (Task.IsShell). Give it a *Shell to run them as the CLI's
// worker does. It panics if h is nil.
func (m *Mux) HandleShell(h Handler) {
	if h == nil {
		panic("worker: Mux.HandleShell with a nil handler")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shell = h
}

// Kinds returns the kinds that have a handler, sorted.
func (m *Mux) Kinds() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.handlers))
}

// Handler returns the Handler that routes each task by its kind, for New
// and Run.
func (m *Mux) Handler() Handler { return HandlerFunc(m.route) }

// route runs the handler of job's kind, or fails permanently when there is
// none.
func (m *Mux) route(ctx context.Context, job *Job) error {
	h, err := m.lookup(job.Task)
	if err != nil {
		return err
	}
	return h.Handle(ctx, job)
}

// lookup finds the handler for t, or returns a permanent error saying why
// there is none.
func (m *Mux) lookup(t *jobq.Task) (Handler, error) {
	m.mu.RLock()
	h, shell := m.handlers[t.Kind], m.shell
	m.mu.RUnlock()
	switch {
	case h != nil:
		return h, nil
	case t.Kind == "" && t.IsShell() && shell != nil:
		return shell, nil
	case t.Kind != "":
		return nil, Permanent(fmt.Errorf("%w %q: %s", ErrUnknownKind, t.Kind, m.known(shell != nil)))
	case t.IsShell():
		return nil, Permanent(fmt.Errorf("%w: the task is a shell command, which this worker does not run (register a handler with Mux.HandleShell); %s", ErrUnknownKind, m.known(false)))
	default:
		return nil, Permanent(fmt.Errorf("%w: the task has neither a kind nor a command (push it with Task.Kind set); %s", ErrUnknownKind, m.known(shell != nil)))
	}
}

// known says which kinds the Mux handles, for an error message.
func (m *Mux) known(shell bool) string {
	kinds := m.Kinds()
	quoted := make([]string, len(kinds))
	for i, k := range kinds {
		quoted[i] = strconv.Quote(k)
	}
	var s string
	switch len(kinds) {
	case 0:
		s = "this worker handles no kinds"
	default:
		s = "this worker handles kinds " + strings.Join(quoted, ", ")
	}
	if shell {
		s += " and shell tasks"
	}
	return s
}

// HandleJSON registers fn on m for tasks of kind, with the task's Payload
// decoded into a T (with encoding/json). A payload that does not decode is
// a permanent failure: the task is dead-lettered at once, with the decode
// error as the reason, because retrying cannot fix it. fn's errors are
// handled as any Handler's: retried while the task's budget lasts (unless
// wrapped with Permanent). fn reaches the rest of the Job (its logger, the
// envelope's delivery count) through JobFrom(ctx). HandleJSON panics as
// Mux.Handle does.
//
// (A generic function, not a method, because Go methods cannot have type
// parameters.)
func HandleJSON[T any](m *Mux, kind string, fn func(ctx context.Context, task *jobq.Task, payload T) error) {
	if fn == nil {
		panic("worker: HandleJSON(" + strconv.Quote(kind) + ") with a nil function")
	}
	m.Handle(kind, HandlerFunc(func(ctx context.Context, job *Job) error {
		var v T
		if err := decodePayload(job.Task.Payload, &v); err != nil {
			return payloadError(kind, v, err)
		}
		return fn(context.WithValue(ctx, jobKey{}, job), job.Task, v)
	}))
}

// payloadError is the permanent failure of a task of kind whose payload
// does not decode into v's type.
func payloadError(kind string, v any, err error) error {
	return Permanent(fmt.Errorf("task of kind %q: payload does not decode into %T: %w", kind, v, err))
}

// jobKey is the context key of the Job that HandleJSON passes on.
type jobKey struct{}

// JobFrom returns the Job being run, from the context HandleJSON gives its
// function; nil for any other context.
func JobFrom(ctx context.Context) *Job {
	j, _ := ctx.Value(jobKey{}).(*Job)
	return j
}

// errNoPayload is the decode error of a task without a payload.
var errNoPayload = errors.New("the task has no payload (it is a shell task, or was pushed without Task.Payload)")

func decodePayload(p json.RawMessage, v any) error {
	if len(p) == 0 {
		return errNoPayload
	}
	return json.Unmarshal(p, v)
}
