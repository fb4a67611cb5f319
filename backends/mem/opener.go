package mem

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Scheme is the URL scheme this package registers.
const Scheme = "mem"

func init() {
	if err := jobq.Register(Scheme, URLOpener{}); err != nil {
		panic(err)
	}
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

// Open implements driver.Opener: it reads the URL into Options and calls
// New.
func (URLOpener) Open(ctx context.Context, u *url.URL, _ driver.OpenOptions) (driver.Driver, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := u.Host + strings.TrimSuffix(u.Path, "/")
	if u.Opaque != "" {
		name = u.Opaque // mem:work
	}
	if name == "" {
		return nil, driver.Errorf(errcode.InvalidArgument, "mem URL names no queue: write mem://NAME")
	}
	p := driver.NewParams(u)
	o := Options{
		Queue:           name,
		MaxMessageBytes: p.Int("max_message_bytes", 0),
		MaxVisibility:   p.Duration("max_visibility", 0),
		MaxPushBatch:    p.Int("max_push_batch", 0),
		MaxReceiveBatch: p.Int("max_receive_batch", 0),
		MaxPeek:         p.Int("max_peek", 0),
		Unsupported:     featureList(p, "unsupported", allDegradable),
		Emulated:        featureList(p, "emulated", emulatable),
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	return New(o)
}

// Options configure a queue built by New. The zero value is the queue
// "default" with no limits and every feature native.
type Options struct {
	// Queue names the queue: drivers of one process with the same Queue
	// share its messages. Defaults to "default".
	Queue string
	// MaxMessageBytes declares and enforces a message size limit. Defaults
	// to 0: none.
	MaxMessageBytes int
	// MaxVisibility declares the longest lease a Receive or Renew may ask
	// for, and so the longest requeue delay. Defaults to 0: none.
	MaxVisibility time.Duration
	// MaxPushBatch, MaxReceiveBatch and MaxPeek declare and enforce batch
	// limits, so that tests see whether the portable layer splits and
	// clamps. Default to 0: none.
	MaxPushBatch, MaxReceiveBatch, MaxPeek int
	// Unsupported and Emulated declare features Unsupported or Emulated,
	// and the driver then behaves as declared, so that tests can exercise
	// the portable layer's degradations. Default to none: every feature but
	// TransactionalPush is native.
	Unsupported, Emulated []driver.Feature
}

// New returns the queue opts names. A driver holds no resources: Close only
// stops it, and the queue's messages stay for other drivers of the same
// Queue until the process exits.
func New(opts Options) (*Driver, error) {
	var bad []string
	if opts.MaxMessageBytes < 0 {
		bad = append(bad, fmt.Sprintf("max_message_bytes=%d is negative: use 0 (no limit) or a size in bytes", opts.MaxMessageBytes))
	}
	if opts.MaxVisibility < 0 {
		bad = append(bad, fmt.Sprintf("max_visibility=%s is negative: use 0 (no limit) or a duration", opts.MaxVisibility))
	}
	if opts.MaxPushBatch < 0 || opts.MaxReceiveBatch < 0 || opts.MaxPeek < 0 {
		bad = append(bad, "max_push_batch, max_receive_batch and max_peek must be 0 (no limit) or positive")
	}
	for _, f := range opts.Unsupported {
		if !slices.Contains(allDegradable, f) {
			bad = append(bad, fmt.Sprintf("feature %s cannot be declared unsupported", f))
		}
		if slices.Contains(opts.Emulated, f) {
			bad = append(bad, fmt.Sprintf("feature %s is listed as both unsupported and emulated", f))
		}
	}
	for _, f := range opts.Emulated {
		if !slices.Contains(emulatable, f) {
			bad = append(bad, fmt.Sprintf("feature %s cannot be declared emulated", f))
		}
	}
	if len(bad) > 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "mem: %s", strings.Join(bad, "; "))
	}
	name := opts.Queue
	if name == "" {
		name = "default"
	}
	caps := capabilities(opts.Unsupported, opts.Emulated, opts.MaxMessageBytes)
	caps.MaxVisibility = opts.MaxVisibility
	caps.MaxPushBatch, caps.MaxReceiveBatch, caps.MaxPeek = opts.MaxPushBatch, opts.MaxReceiveBatch, opts.MaxPeek
	return &Driver{
		s:       storeFor(name),
		name:    name,
		caps:    caps,
		closing: driver.NewClosing("mem queue handle " + name),
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
	driver.ConcurrencyLimit, driver.RateLimit, driver.Results, driver.Cancel, driver.WorkerRegistry, driver.Pause, driver.Groups,
	driver.BulkActions,
	driver.Schedules,
	driver.Dependencies,
}

// emulatable are the features that emulated= may name, each with what the
// emulation does differently.
var emulatable = []driver.Feature{
	driver.DelayedRequeue, driver.DelayedPush, driver.LeaseRenewal, driver.DeadLetter,
	driver.Priority, driver.Peek, driver.ExactCount, driver.Dedup,
	driver.ConcurrencyLimit, driver.RateLimit, driver.Results, driver.Cancel, driver.WorkerRegistry, driver.Pause, driver.Groups,
	driver.BulkActions,
	driver.Schedules,
}

var emulatedFallback = map[driver.Feature]string{
	driver.Schedules:        "schedules behave as native (mem declares them emulated for tests only)",
	driver.Groups:           "group counts behave as native (mem declares them emulated for tests only)",
	driver.Pause:            "a pause behaves as native (mem declares it emulated for tests only)",
	driver.BulkActions:      "bulk actions see only the first peek window of queued tasks and dead letters per pass (mem test emulation of the Azure backends)",
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
	driver.Results:          "results behave as native (mem declares them emulated for tests only)",
	driver.Cancel:           "a queued task cannot be removed by ID: the worker that receives it drops it as cancelled (mem test emulation of the Azure backends)",
	driver.WorkerRegistry:   "worker records behave as native (mem declares them emulated for tests only)",
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
	driver.Results:           "mem was opened with results unsupported: no result records are kept",
	driver.Cancel:            "mem was opened with cancel unsupported",
	driver.WorkerRegistry:    "mem was opened with worker-registry unsupported",
	driver.Pause:             "mem was opened with pause unsupported: pause and resume are refused",
	driver.BulkActions:       "mem was opened with bulk-actions unsupported: requeue, cancel and purge by filter are refused",
	driver.Schedules:         "mem was opened with schedules unsupported: schedules are refused",
	driver.Groups:            "mem was opened with groups unsupported: a push with a group is refused",
	driver.Dependencies:      "mem was opened with dependencies unsupported: a push with After, AfterGroups or a group step is refused",
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
	fs[driver.ResultHistory] = driver.Support{Level: driver.Emulated, Fallback: resultHistoryFallback}
	if fs[driver.Results].Level == driver.Unsupported {
		fs[driver.ResultHistory] = driver.Support{Level: driver.Unsupported, Fallback: "no result records are kept (results unsupported)"}
	}
	return driver.Capabilities{Features: fs, MaxMessageBytes: maxBytes}
}
