package jobq

import (
	"net/url"
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

// secretParams are query parameters whose values are credentials.
var secretParams = map[string]bool{
	"password": true, "pass": true, "pwd": true, "key": true, "accountkey": true,
	"sharedaccesskey": true, "sig": true, "signature": true, "token": true,
	"sas": true, "secret": true, "client_secret": true, "connection_string": true,
	"conn_str": true, "sslpassword": true, "access_token": true,
}

// RedactURL returns s with credentials replaced by "xxxxx": the password of
// the user-info part and the values of query parameters that carry secrets
// (password, key, sig, SharedAccessKey, ...). Use it for every URL that
// reaches a log or an error. Strings that do not parse are reduced to their
// scheme.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if i := strings.Index(s, "://"); i > 0 {
			return s[:i] + "://(unparsable URL redacted)"
		}
		return "(unparsable URL redacted)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k := range q {
			if secretParams[strings.ToLower(k)] {
				q[k] = []string{"xxxxx"}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// RedactConnectionString hides the secret parts of an Azure-style connection
// string ("AccountKey=...;SharedAccessKey=...;SharedAccessSignature=...").
func RedactConnectionString(s string) string {
	parts := strings.Split(s, ";")
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "accountkey", "sharedaccesskey", "sharedaccesssignature", "password":
			parts[i] = k + "=xxxxx"
		}
	}
	return strings.Join(parts, ";")
}
