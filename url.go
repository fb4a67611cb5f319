package jobq

import (
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/jobq/jobq/driver"
)

var registry = struct {
	sync.RWMutex
	openers map[string]driver.Opener
}{openers: map[string]driver.Opener{}}

// Register makes a backend available under a URL scheme. Backends call it
// from an init function; importing github.com/jobq/jobq/backends/all
// registers every backend. Registering a scheme twice panics, because it is
// a programming error found at start-up.
func Register(scheme string, o driver.Opener) {
	registry.Lock()
	defer registry.Unlock()
	scheme = strings.ToLower(scheme)
	if _, dup := registry.openers[scheme]; dup {
		panic("jobq: scheme " + scheme + " registered twice")
	}
	registry.openers[scheme] = o
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.openers))
	for s := range registry.openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// BackendCapabilities returns what the backend registered for scheme
// declares, without connecting.
func BackendCapabilities(scheme string) (driver.Capabilities, bool) {
	registry.RLock()
	defer registry.RUnlock()
	o, ok := registry.openers[strings.ToLower(scheme)]
	if !ok {
		return driver.Capabilities{}, false
	}
	return o.Capabilities(), true
}

// BackendOpener returns the opener registered for scheme, for tools that
// must reach a driver beneath the portable layer (the conformance suite
// stores raw, undecodable messages through it). Programs use Open.
func BackendOpener(scheme string) (driver.Opener, bool) { return lookupOpener(scheme) }

func lookupOpener(scheme string) (driver.Opener, bool) {
	registry.RLock()
	defer registry.RUnlock()
	o, ok := registry.openers[strings.ToLower(scheme)]
	return o, ok
}

// bareAzureQueue matches ai4s-jobq's "account/queue" form.
var bareAzureQueue = regexp.MustCompile(`^[a-z0-9]{3,24}/[a-z0-9][a-z0-9-]{1,62}$`)

// NormalizeURL turns the queue forms ai4s-jobq accepts into URLs:
// "account/queue" becomes "azqueue://account/queue". Other strings are
// returned unchanged.
func NormalizeURL(s string) string {
	if !strings.Contains(s, "://") && bareAzureQueue.MatchString(s) {
		return "azqueue://" + s
	}
	return s
}
