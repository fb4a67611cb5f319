package mem

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "mem"

func init() {
	jobq.Register(Scheme, URLOpener{})
}

// URLOpener opens mem:// URLs. The zero value is ready to use.
type URLOpener struct{}

// stores holds every named queue of the process, so that Opens of the same
// name share state.
var stores = struct {
	sync.Mutex
	m map[string]*store
}{m: map[string]*store{}}

func storeFor(name string) *store {
	stores.Lock()
	defer stores.Unlock()
	s, ok := stores.m[name]
	if !ok {
		s = newStore()
		stores.m[name] = s
	}
	return s
}

// Capabilities implements driver.Opener: what a queue opened without
// parameters declares.
func (URLOpener) Capabilities() driver.Capabilities { return capabilities(nil, nil, 0) }

// Open implements driver.Opener.
func (URLOpener) Open(ctx context.Context, u *url.URL, _ driver.OpenOptions) (driver.Driver, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := u.Host + strings.TrimSuffix(u.Path, "/")
	if u.Opaque != "" {
		name = u.Opaque // mem:work
	}
	if name == "" {
		return nil, driver.Errorf(driver.InvalidArgument, "mem URL names no queue: write mem://NAME")
	}
	p := driver.NewParams(u)
	maxBytes := p.Int("max_message_bytes", 0)
	if maxBytes < 0 {
		p.Fail("query parameter max_message_bytes=%d is negative: use 0 (no limit) or a size in bytes", maxBytes)
	}
	maxVis := p.Duration("max_visibility", 0)
	maxPush, maxReceive, maxPeek := p.Int("max_push_batch", 0), p.Int("max_receive_batch", 0), p.Int("max_peek", 0)
	if maxPush < 0 || maxReceive < 0 || maxPeek < 0 {
		p.Fail("query parameters max_push_batch, max_receive_batch and max_peek must be 0 (no limit) or positive")
	}
	unsupported := featureList(p, "unsupported", allDegradable)
	emulated := featureList(p, "emulated", emulatable)
	for _, f := range unsupported {
		if slices.Contains(emulated, f) {
			p.Fail("feature %s is listed as both unsupported and emulated", f)
		}
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	caps := capabilities(unsupported, emulated, maxBytes)
	caps.MaxVisibility = maxVis
	caps.MaxPushBatch, caps.MaxReceiveBatch, caps.MaxPeek = maxPush, maxReceive, maxPeek
	return &memDriver{
		s:      storeFor(name),
		name:   name,
		caps:   caps,
		closed: make(chan struct{}),
	}, nil
}

// featureList reads a comma-separated list of feature names.
func featureList(p *driver.Params, param string, allowed []driver.Feature) []driver.Feature {
	raw := p.String(param, "")
	if raw == "" {
		return nil
	}
	var out []driver.Feature
	for name := range strings.SplitSeq(raw, ",") {
		f := driver.Feature(strings.TrimSpace(name))
		if !slices.Contains(allowed, f) {
			names := make([]string, len(allowed))
			for i, a := range allowed {
				names[i] = string(a)
			}
			p.Fail("query parameter %s names %q, which the mem backend cannot declare %s; use one of %s",
				param, f, param, strings.Join(names, ", "))
			continue
		}
		out = append(out, f)
	}
	return out
}

// allDegradable are the features that unsupported= may name; the rest are
// unsupported always.
var allDegradable = []driver.Feature{
	driver.DelayedRequeue, driver.DelayedPush, driver.LeaseRenewal, driver.DeadLetter,
	driver.Priority, driver.Peek, driver.ExactCount, driver.Dedup, driver.InPlaceUpdate,
	driver.ConcurrencyLimit, driver.RateLimit,
}

// emulatable are the features that emulated= may name, each with what the
// emulation does differently.
var emulatable = []driver.Feature{
	driver.DelayedRequeue, driver.DelayedPush, driver.LeaseRenewal, driver.DeadLetter,
	driver.Priority, driver.Peek, driver.ExactCount, driver.Dedup,
	driver.ConcurrencyLimit, driver.RateLimit,
}

var emulatedFallback = map[driver.Feature]string{
	driver.DelayedRequeue:   "Requeue(delay) makes the message visible at once (mem test emulation)",
	driver.DelayedPush:      "a task pushed with NotBefore is visible at once (mem test emulation)",
	driver.LeaseRenewal:     "Renew behaves as native (mem declares it emulated for tests only)",
	driver.DeadLetter:       "dead letters behave as native (mem declares them emulated for tests only)",
	driver.Priority:         "priority behaves as native (mem declares it emulated for tests only)",
	driver.Peek:             "peek behaves as native (mem declares it emulated for tests only)",
	driver.ExactCount:       "counts are exact (mem declares them approximate for tests only)",
	driver.Dedup:            "a duplicate task ID is dropped silently; PushResult.Duplicate stays false (as Service Bus duplicate detection)",
	driver.ConcurrencyLimit: "policies are stored but claims ignore them; each worker enforces concurrency caps for its own process only, not across workers (mem test emulation of the Azure backends)",
	driver.RateLimit:        "policies are stored but claims ignore them; each worker enforces rate limits for its own process only, not across workers (mem test emulation of the Azure backends)",
}

var unsupportedFallback = map[driver.Feature]string{
	driver.DelayedRequeue:    "mem was opened with delayed-requeue unsupported",
	driver.DelayedPush:       "mem was opened with delayed-push unsupported",
	driver.LeaseRenewal:      "mem was opened with lease-renewal unsupported",
	driver.DeadLetter:        "mem was opened with dead-letter unsupported",
	driver.Peek:              "mem was opened with peek unsupported",
	driver.Priority:          "priority is ignored; tasks are received in push order",
	driver.ExactCount:        "counts are exact, but declared approximate for tests",
	driver.Dedup:             "a task whose ID is already queued is queued again",
	driver.InPlaceUpdate:     "the retry budget is counted from the delivery count",
	driver.ConcurrencyLimit:  "mem was opened with concurrency-limit unsupported",
	driver.RateLimit:         "mem was opened with rate-limit unsupported",
	driver.TransactionalPush: "the mem backend has no transactions to join",
}

// capabilities builds the declaration: everything native except what the
// URL degrades and transactional push, which mem never has.
func capabilities(unsupported, emulated []driver.Feature, maxBytes int) driver.Capabilities {
	fs := make(map[driver.Feature]driver.Support, len(driver.AllFeatures))
	for _, f := range driver.AllFeatures {
		fs[f] = driver.Support{Level: driver.Native}
	}
	for _, f := range []driver.Feature{driver.TransactionalPush} {
		fs[f] = driver.Support{Level: driver.Unsupported, Fallback: unsupportedFallback[f]}
	}
	for _, f := range unsupported {
		fs[f] = driver.Support{Level: driver.Unsupported, Fallback: unsupportedFallback[f]}
	}
	for _, f := range emulated {
		fs[f] = driver.Support{Level: driver.Emulated, Fallback: emulatedFallback[f]}
	}
	return driver.Capabilities{Features: fs, MaxMessageBytes: maxBytes}
}
