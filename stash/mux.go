package stash

import (
	"context"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// URLOpener opens the stores of one URL scheme. Store packages provide one
// and register it in init; programs with credentials of their own can
// register a configured one on their own URLMux, or skip URLs and build the
// store from their client (gcs.New, azblob.New).
type URLOpener interface {
	// OpenStoreURL opens the store u names. u has the opener's scheme and
	// no query or fragment (the mux rejects those: stores take no
	// parameters in the URL, and credentials never ride in it). Errors are
	// *driver.Error values, InvalidArgument for a URL the store cannot use.
	OpenStoreURL(ctx context.Context, u *url.URL) (Store, error)
}

// URLMux maps URL schemes to the openers of their stores. The zero value is
// an empty mux, ready to use; DefaultURLMux is the one Open, the CLI and the
// jobq package use. Its methods are safe for concurrent use.
type URLMux struct {
	mu      sync.RWMutex
	openers map[string]URLOpener
}

// Register makes o open URLs of scheme (case-insensitive). Registering a
// scheme twice panics: it is a programming error found at start-up.
func (m *URLMux) Register(scheme string, o URLOpener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	scheme = strings.ToLower(scheme)
	if m.openers == nil {
		m.openers = map[string]URLOpener{}
	}
	if _, dup := m.openers[scheme]; dup {
		panic("stash: scheme " + scheme + " registered twice")
	}
	m.openers[scheme] = o
}

// Schemes returns the registered schemes, sorted.
func (m *URLMux) Schemes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.openers))
}

// Opener returns the opener registered for scheme, if any.
func (m *URLMux) Opener(scheme string) (URLOpener, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	o, ok := m.openers[strings.ToLower(scheme)]
	return o, ok
}

// ValidScheme reports whether scheme is registered.
func (m *URLMux) ValidScheme(scheme string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.openers[strings.ToLower(scheme)]
	return ok
}

// Open opens the store at rawURL with the opener of its scheme. A URL that
// does not parse, has a query or fragment, or has a scheme nobody
// registered is an InvalidArgument error that says what to do.
func (m *URLMux) Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash URL does not parse: %v; use %s", err, m.examples())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash URL %q has a query or fragment; stores take no parameters: use %s", u.Redacted(), m.examples())
	}
	m.mu.RLock()
	o, ok := m.openers[strings.ToLower(u.Scheme)]
	m.mu.RUnlock()
	if !ok {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash URL %q has unknown scheme %q; registered: %s (a program registers a store by importing its package, such as github.com/jobq/jobq/stash/gcs; stash/all registers every one)",
			u.Redacted(), u.Scheme, strings.Join(m.Schemes(), ", "))
	}
	return o.OpenStoreURL(ctx, u)
}

// examples lists URL forms of the registered schemes for error messages.
func (m *URLMux) examples() string {
	forms := map[string]string{"file": "file:///dir", "gs": "gs://bucket/prefix", "azblob": "azblob://account/container/prefix"}
	var out []string
	for _, s := range m.Schemes() {
		if f, ok := forms[s]; ok {
			out = append(out, f)
		} else {
			out = append(out, s+"://...")
		}
	}
	if len(out) == 0 {
		return "a registered scheme (none is)"
	}
	return strings.Join(out, " or ")
}

var defaultMux = new(URLMux)

func init() { defaultMux.Register(FileScheme, FileOpener{}) }

// DefaultURLMux returns the mux Open uses, on which store packages register
// their schemes when imported.
func DefaultURLMux() *URLMux { return defaultMux }

// Register registers o for scheme on the default URLMux; store packages call
// it from init.
func Register(scheme string, o URLOpener) { defaultMux.Register(scheme, o) }
