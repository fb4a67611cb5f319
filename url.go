package jobq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// URLMux maps URL schemes to the backends that open them. Its zero value is
// an empty mux, ready to use. Backends register on the default mux (see
// DefaultURLMux) from their init functions; a test or an embedding program
// that wants its own set of schemes, or an opener configured with values
// (credentials, clients), registers them on a URLMux of its own.
type URLMux struct {
	mu      sync.RWMutex
	openers map[string]driver.Opener
}

var defaultMux = new(URLMux)

// DefaultURLMux returns the mux that Open, OpenWithOptions and Register use.
// Importing github.com/jobq/jobq/backends/all registers every backend on it.
func DefaultURLMux() *URLMux { return defaultMux }

// Register makes a backend available on the default mux under a URL scheme;
// it is DefaultURLMux().Register. A backend's init panics on its error,
// which only a programming error causes.
func Register(scheme string, o driver.Opener) error { return defaultMux.Register(scheme, o) }

// Register makes o open URLs of scheme (case-insensitive). A scheme that is
// registered already, an empty scheme or a nil opener is an error (code
// AlreadyExists or InvalidArgument) and changes nothing.
func (m *URLMux) Register(scheme string, o driver.Opener) error {
	const op = "register"
	scheme = strings.ToLower(scheme)
	if scheme == "" || o == nil {
		return errorf(errcode.InvalidArgument, op, "register needs a scheme and an opener; got scheme %q, opener %v", scheme, o)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.openers[scheme]; dup {
		return errorf(errcode.AlreadyExists, op, "scheme %q is registered already; register each scheme once, or use a URLMux of your own", scheme)
	}
	if m.openers == nil {
		m.openers = map[string]driver.Opener{}
	}
	m.openers[scheme] = o
	return nil
}

// Schemes returns the registered URL schemes, sorted.
func (m *URLMux) Schemes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.openers))
}

// Opener returns the opener registered for scheme, for tools that must
// reach a driver beneath the portable layer or read a backend's declared
// capabilities without connecting. Programs use Open.
func (m *URLMux) Opener(scheme string) (driver.Opener, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	o, ok := m.openers[strings.ToLower(scheme)]
	return o, ok
}

// Open opens the queue named by rawURL: its scheme picks the opener, the
// portable layer takes its own parameters (stash=) from the query, and the
// driver the opener returns becomes the Queue, as New would make it. An
// unknown scheme or query parameter is an InvalidArgument error that names
// it.
func (m *URLMux) Open(ctx context.Context, rawURL string, opts Options) (*Queue, error) {
	rawURL = strings.TrimSpace(rawURL)
	redacted := redact.URL(rawURL)
	if rawURL == "" {
		return nil, &Error{Code: errcode.InvalidArgument, Op: "open", Msg: "no queue given: pass a queue URL such as sqlite://./work.db?queue=default"}
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, &Error{Code: errcode.InvalidArgument, Op: "open", Queue: redacted,
			Msg: fmt.Sprintf("%q is not a queue URL: use SCHEME://...; registered schemes: %s", redacted, orNone(m.Schemes()))}
	}
	opener, ok := m.Opener(u.Scheme)
	if !ok {
		return nil, &Error{Code: errcode.InvalidArgument, Op: "open", Queue: redacted,
			Msg: fmt.Sprintf("unknown queue scheme %q: registered schemes are %s (import github.com/jobq/jobq/backends/all to register every backend)",
				u.Scheme, orNone(m.Schemes()))}
	}
	log := opts.logger().With("queue", redacted)
	stashes, err := openStashes(ctx, opts.StashMux, takeStashParam(u, opts.StashURL), redacted)
	if err != nil {
		return nil, err
	}
	drv, err := opener.Open(ctx, u, driver.OpenOptions{Logger: log, ConnectionString: opts.ConnectionString, ReadOnly: opts.ReadOnly,
		Concurrency: opts.Concurrency})
	if err != nil {
		var je *Error
		stashes.close()
		if errors.As(err, &je) {
			return nil, err
		}
		return nil, &Error{Code: errcode.Of(err), Op: "open", Queue: redacted, Msg: err.Error(), Err: err}
	}
	return newQueue(drv, opts, queueInfo{scheme: strings.ToLower(u.Scheme), url: redacted, name: queueName(u, drv), log: log, stash: stashes}), nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// queueName asks the driver (driver.Namer); otherwise it is the queue=
// parameter, else the last path element.
func queueName(u *url.URL, drv driver.Driver) string {
	if n, ok := drv.(driver.Namer); ok {
		return n.QueueName()
	}
	if n := u.Query().Get("queue"); n != "" {
		return n
	}
	p := strings.Trim(u.Path, "/")
	if i := strings.LastIndex(p, "/"); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		return "default"
	}
	return p
}
