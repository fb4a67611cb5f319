package driver

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq/errcode"
)

// PolicyKind names one kind of queue policy.
type PolicyKind string

// The policy kinds.
const (
	// ConcurrencyPolicy caps how many messages with one concurrency key may
	// be leased at once (Limit). Needs the ConcurrencyLimit feature.
	ConcurrencyPolicy PolicyKind = "concurrency"
	// RatePolicy caps how many messages with one rate-limit key may be
	// claimed in any rolling window of Period (Limit claims). Needs the
	// RateLimit feature.
	RatePolicy PolicyKind = "rate"
	// MaxDepthPolicy caps how many live messages (ready, delayed and in
	// flight; not dead) the queue holds (Limit). It has no key.
	MaxDepthPolicy PolicyKind = "max-depth"
	// RetentionPolicy is how long result records are kept after a task
	// ends (Period; Limit is always 1). It has no key; the portable layer
	// reads it and drivers only store it.
	RetentionPolicy PolicyKind = "retention"
	// RetryBackoffPolicy is the queue's default delay before retrying a
	// failed task: Period is the first delay (the base), Limit the longest
	// (the cap) in milliseconds. It has no key; the portable layer reads it
	// and drivers only store it.
	RetryBackoffPolicy PolicyKind = "retry-backoff"
	// ResultsPolicy says which tasks keep a result record (Limit, a
	// ResultsMode). It has no key; the portable layer reads it and drivers
	// only store it. A queue without one keeps every task's record
	// (ResultsAll).
	ResultsPolicy PolicyKind = "results"
	// PausePolicy stops workers taking new tasks: from the whole queue, or
	// only those of one task kind or policy key. Key is the encoded
	// PauseState (see PauseState.Policy) and Limit the pause's start in
	// Unix milliseconds. Drivers store it as they store the others (keeping
	// its key); workers read it, so it needs the Pause feature.
	PausePolicy PolicyKind = "pause"
)

// PolicyKinds lists the kinds in the order listings show them.
var PolicyKinds = []PolicyKind{ConcurrencyPolicy, RatePolicy, MaxDepthPolicy, RetentionPolicy, RetryBackoffPolicy, ResultsPolicy, PausePolicy, SchedulePolicy, ScheduleFiredPolicy, SchedulePausedPolicy}

// ResultsMode is the value of a results policy: which tasks keep a result
// record.
type ResultsMode int64

// The results modes.
const (
	// ResultsAll keeps a record of every task that ends (the default).
	ResultsAll ResultsMode = 1
	// ResultsFailed keeps full records of the tasks that fail (are
	// dead-lettered) and a bare one (state and times) of those that
	// succeed, so waiting still works.
	ResultsFailed ResultsMode = 2
	// ResultsNone keeps no record of tasks that end: waiting for a task
	// and reading its result are refused.
	ResultsNone ResultsMode = 3
)

// String returns the mode's name: all, failed or none.
func (m ResultsMode) String() string {
	switch m {
	case ResultsAll:
		return "all"
	case ResultsFailed:
		return "failed"
	case ResultsNone:
		return "none"
	}
	return fmt.Sprintf("results-mode(%d)", int64(m))
}

// ParseResultsMode reads all, failed or none.
func ParseResultsMode(s string) (ResultsMode, error) {
	for _, m := range []ResultsMode{ResultsAll, ResultsFailed, ResultsNone} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, Errorf(errcode.InvalidArgument, "results policy %q: use all, failed or none", s)
}

// KeepResults returns the results policy for m.
func KeepResults(m ResultsMode) Policy {
	return Policy{Kind: ResultsPolicy, Limit: int64(m)}
}

// Keyed reports whether policies of kind k apply per key (concurrency and
// rate) rather than to the whole queue.
func (k PolicyKind) Keyed() bool { return k == ConcurrencyPolicy || k == RatePolicy }

// Retention returns the retention policy for d (at least a second).
func Retention(d time.Duration) Policy {
	return Policy{Kind: RetentionPolicy, Limit: 1, Period: d}
}

// RetryBackoff returns the retry-backoff policy for base and cap (whole
// milliseconds; cap at least base).
func RetryBackoff(base, cap time.Duration) Policy {
	return Policy{Kind: RetryBackoffPolicy, Limit: cap.Milliseconds(), Period: base}
}

// Backoff returns a retry-backoff policy's base and cap.
func (p Policy) Backoff() (base, cap time.Duration) {
	return p.Period, time.Duration(p.Limit) * time.Millisecond
}

// MaxPolicyKeyLen bounds a policy or task key, so that keys fit every
// engine's index and metadata limits.
const MaxPolicyKeyLen = 200

// Policy is one queue policy. A queue has at most one policy per kind and
// key; setting one again replaces it.
type Policy struct {
	Kind PolicyKind
	// Key is the concurrency or rate-limit key; empty for max-depth.
	Key string
	// Limit is the concurrency cap, the number of claims per Period, or the
	// maximum depth. Always positive.
	Limit int64
	// Period is the rate policy's rolling window; zero for the others.
	Period time.Duration
}

// String formats the policy as the CLI takes it: "concurrency KEY=LIMIT",
// "rate KEY=COUNT/PERIOD", "max-depth N", "retention DURATION" or
// "retry-backoff BASE,CAP" or "results all|failed|none".
func (p Policy) String() string {
	switch p.Kind {
	case ConcurrencyPolicy:
		return fmt.Sprintf("concurrency %s=%d", p.Key, p.Limit)
	case RatePolicy:
		return fmt.Sprintf("rate %s=%d/%s", p.Key, p.Limit, shortDuration(p.Period))
	case MaxDepthPolicy:
		return fmt.Sprintf("max-depth %d", p.Limit)
	case RetentionPolicy:
		return "retention " + shortDuration(p.Period)
	case RetryBackoffPolicy:
		base, cap := p.Backoff()
		return fmt.Sprintf("retry-backoff %s,%s", shortDuration(base), shortDuration(cap))
	case ResultsPolicy:
		return "results " + ResultsMode(p.Limit).String()
	case PausePolicy:
		if ps, err := ParsePause(p); err == nil {
			return ps.String()
		}
	case SchedulePolicy:
		if s, err := ParseScheduleSpec(p); err == nil {
			return "schedule " + s.Name + " " + s.Cron
		}
	}
	return fmt.Sprintf("%s %s=%d", p.Kind, p.Key, p.Limit)
}

// Validate returns an InvalidArgument error naming the problem when the
// policy cannot be stored.
func (p Policy) Validate() error {
	switch p.Kind {
	case ConcurrencyPolicy, RatePolicy:
		if err := ValidateKey(string(p.Kind)+" key", p.Key); err != nil {
			return err
		}
		if p.Key == "" {
			return Errorf(errcode.InvalidArgument, "a %s policy needs a key: write %s KEY=...", p.Kind, p.Kind)
		}
	case MaxDepthPolicy:
		if p.Key != "" {
			return Errorf(errcode.InvalidArgument, "max-depth applies to the whole queue and takes no key (got %q): write max-depth N", p.Key)
		}
	case RetentionPolicy, RetryBackoffPolicy:
		return p.validateDurations()
	case PausePolicy:
		_, err := ParsePause(p)
		return err
	case SchedulePolicy, ScheduleFiredPolicy, SchedulePausedPolicy:
		return validateSchedulePolicy(p)
	case ResultsPolicy:
		switch {
		case p.Key != "":
			return Errorf(errcode.InvalidArgument, "results applies to the whole queue and takes no key (got %q)", p.Key)
		case p.Period != 0:
			return Errorf(errcode.InvalidArgument, "a results policy has no period (got %v)", p.Period)
		}
		if _, err := ParseResultsMode(ResultsMode(p.Limit).String()); err != nil {
			return Errorf(errcode.InvalidArgument, "results policy value %d: build it with KeepResults(ResultsAll, ResultsFailed or ResultsNone)", p.Limit)
		}
		return nil
	default:
		return Errorf(errcode.InvalidArgument, "unknown policy kind %q: use concurrency, rate, max-depth, retention, retry-backoff or results", p.Kind)
	}
	if p.Limit <= 0 {
		return Errorf(errcode.InvalidArgument, "%s limit is %d; it must be a positive whole number (unset the policy to remove the limit)", p.Kind, p.Limit)
	}
	if p.Kind == RatePolicy {
		if p.Period <= 0 || p.Period == math.MaxInt64 {
			return Errorf(errcode.InvalidArgument, "rate period %v must be a positive, finite duration such as 1s, 1m or 1h", p.Period)
		}
		if p.Period < time.Millisecond {
			return Errorf(errcode.InvalidArgument, "rate period %v is shorter than the 1ms resolution claims are timed with", p.Period)
		}
	} else if p.Period != 0 {
		return Errorf(errcode.InvalidArgument, "only rate, retention and retry-backoff policies have a period; %s got %v", p.Kind, p.Period)
	}
	return nil
}

// MaxPolicyDuration bounds the durations of the retention and retry-backoff
// policies: ten years.
const MaxPolicyDuration = 10 * 365 * 24 * time.Hour

// validateDurations checks a retention or retry-backoff policy.
func (p Policy) validateDurations() error {
	if p.Key != "" {
		return Errorf(errcode.InvalidArgument, "%s applies to the whole queue and takes no key (got %q)", p.Kind, p.Key)
	}
	if p.Kind == RetentionPolicy {
		switch {
		case p.Limit != 1:
			return Errorf(errcode.InvalidArgument, "a retention policy has Limit 1 (got %d): build it with Retention(d)", p.Limit)
		case p.Period < time.Second || p.Period > MaxPolicyDuration:
			return Errorf(errcode.InvalidArgument, "retention %v is out of range: keep results for 1s to 3650d (%v), for example 2d", p.Period, MaxPolicyDuration)
		}
		return nil
	}
	base, cap := p.Backoff()
	switch {
	case base < time.Millisecond || base > MaxPolicyDuration:
		return Errorf(errcode.InvalidArgument, "retry-backoff base %v is out of range: use 1ms to %v, for example 10s", base, MaxPolicyDuration)
	case p.Limit <= 0 || cap > MaxPolicyDuration || p.Limit > MaxPolicyDuration.Milliseconds():
		return Errorf(errcode.InvalidArgument, "retry-backoff cap %v is out of range: use 1ms to %v, for example 1h", cap, MaxPolicyDuration)
	case cap < base:
		return Errorf(errcode.InvalidArgument, "retry-backoff cap %v is shorter than its base %v: write BASE,CAP with CAP at least BASE, for example 10s,1h", cap, base)
	}
	return nil
}

// ValidateKey checks a concurrency or rate-limit key: at most
// MaxPolicyKeyLen bytes, printable, without '=' or '/' (which the CLI's
// KEY=COUNT/PERIOD syntax uses). The empty key means "no key".
func ValidateKey(what, key string) error {
	if len(key) > MaxPolicyKeyLen {
		return Errorf(errcode.InvalidArgument, "%s is %d bytes long; keep it to %d", what, len(key), MaxPolicyKeyLen)
	}
	if strings.ContainsAny(key, "=/") {
		return Errorf(errcode.InvalidArgument, "%s %q contains '=' or '/', which policy syntax reserves", what, key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return Errorf(errcode.InvalidArgument, "%s %q contains a control character", what, key)
		}
	}
	return nil
}

// KeyStat is what a backend knows about one key at one moment.
type KeyStat struct {
	// Kind is ConcurrencyPolicy or RatePolicy.
	Kind PolicyKind
	Key  string
	// InFlight counts leased messages with this concurrency key; for rate
	// keys, Admitted counts claims within the current window.
	InFlight int64
	Admitted int64
	// Waiting counts ready messages with this key (-1 when unknown).
	Waiting int64
}

// PolicyStore is implemented by drivers that keep queue policies in their
// engine, so that every handle on every machine sees the same ones. The
// portable layer detects it with a type assertion; a driver without it
// supports no policies at all (Admin.Policies and SetPolicy are then
// Unimplemented), and declares ConcurrencyLimit and RateLimit unsupported.
// It is needed by the conformance checks PolicyValidation, ConcurrencyCap,
// RateLimit, MaxDepth, QueueWidePolicies and ResultRetention, which skip
// without it.
//
// A driver that implements PolicyStore stores the retention and
// retry-backoff policies (which the portable layer applies), the
// concurrency and rate policies its ConcurrencyLimit and RateLimit
// declarations allow, and max-depth as below; it enforces, atomically with
// the state change that could break them:
//
//   - max-depth, where its engine can count and refuse in one step:
//     Push fails with ResourceExhausted (use QueueFull) when storing the
//     batch's new, non-duplicate messages would make the live messages
//     (ready, delayed, in flight) exceed the limit. A Push call is then
//     all-or-nothing: nothing of the batch is stored. RequeueDead and
//     Requeue are not bounded (they return work that was already
//     admitted). A driver that cannot enforce it refuses to store a
//     max-depth policy: SetPolicy returns Unimplemented (the MaxDepth
//     check then skips), rather than storing a bound nobody keeps.
//   - concurrency, when ConcurrencyLimit is Native: a claim never leases a
//     message whose key already has Limit held leases; it skips to the next
//     eligible message in claim order, so a blocked key never blocks the
//     queue. A lease stops counting when it is settled or expires.
//   - rate, when RateLimit is Native: a claim never leases a message whose
//     key had Limit claims within the last Period (rolling window; every
//     claim counts, redeliveries included); it skips as above.
//
// Keys without a policy are unlimited. When a feature is Emulated the
// driver only stores the policies and the worker enforces them per process.
type PolicyStore interface {
	// SetPolicy stores p (already validated), replacing the policy of the
	// same kind and key.
	SetPolicy(ctx context.Context, p Policy) error
	// UnsetPolicy removes the policy of that kind and key and reports
	// whether there was one.
	UnsetPolicy(ctx context.Context, kind PolicyKind, key string) (bool, error)
	// ListPolicies returns every policy, sorted by kind then key.
	ListPolicies(ctx context.Context) ([]Policy, error)
	// KeyStats reports, for every key that has a policy or a leased
	// message, its current counts, sorted by kind then key.
	KeyStats(ctx context.Context) ([]KeyStat, error)
}

// QueueFullError is the cause inside the ResourceExhausted error of a push
// refused by max-depth.
type QueueFullError struct {
	// Depth is the number of live messages when the push was refused.
	Depth int64
	// MaxDepth is the bound; Adding is how many new messages the push had.
	MaxDepth int64
	Adding   int
}

// Error implements error.
func (e *QueueFullError) Error() string {
	return fmt.Sprintf("queue is full: %d of max-depth %d messages queued, cannot add %d (wait for workers to drain it, push with --wait-for-room, or raise the bound with `policy set max-depth N`)",
		e.Depth, e.MaxDepth, e.Adding)
}

// QueueFull returns the error a driver returns for a push refused by
// max-depth: code ResourceExhausted, wrapping a *QueueFullError.
func QueueFull(depth, maxDepth int64, adding int) error {
	qf := &QueueFullError{Depth: depth, MaxDepth: maxDepth, Adding: adding}
	return &Error{Code: errcode.ResourceExhausted, Msg: qf.Error(), Err: qf}
}

// shortDuration drops zero trailing units: 1m rather than 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"0s", "0m"} {
		if t, ok := strings.CutSuffix(s, z); ok && len(t) > 0 && (strings.HasSuffix(t, "m") || strings.HasSuffix(t, "h")) {
			s = t
		}
	}
	return s
}

// EncodePolicies encodes policies as one ASCII token (base64url of JSON),
// for drivers that keep them in a metadata value, which only takes
// header-safe text.
func EncodePolicies(ps []Policy) string {
	type wire struct {
		Kind   PolicyKind `json:"k"`
		Key    string     `json:"key,omitempty"`
		Limit  int64      `json:"n"`
		Period int64      `json:"p_ms,omitempty"`
	}
	ws := make([]wire, len(ps))
	for i, p := range ps {
		ws[i] = wire{p.Kind, p.Key, p.Limit, p.Period.Milliseconds()}
	}
	b, _ := json.Marshal(ws)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodePolicies reverses EncodePolicies; the empty string is no policies.
func DecodePolicies(s string) ([]Policy, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, Errorf(errcode.Internal, "stored policies are not base64url: %w", err)
	}
	var ws []struct {
		Kind   PolicyKind `json:"k"`
		Key    string     `json:"key"`
		Limit  int64      `json:"n"`
		Period int64      `json:"p_ms"`
	}
	if err := json.Unmarshal(b, &ws); err != nil {
		return nil, Errorf(errcode.Internal, "stored policies are not valid JSON: %w", err)
	}
	out := make([]Policy, len(ws))
	for i, w := range ws {
		out[i] = Policy{Kind: w.Kind, Key: w.Key, Limit: w.Limit, Period: time.Duration(w.Period) * time.Millisecond}
	}
	SortPolicies(out)
	return out, nil
}

// SortPolicies sorts by kind (PolicyKinds order), then key.
func SortPolicies(ps []Policy) {
	slices.SortFunc(ps, func(a, b Policy) int {
		return cmp.Or(cmp.Compare(slices.Index(PolicyKinds, a.Kind), slices.Index(PolicyKinds, b.Kind)), cmp.Compare(a.Key, b.Key))
	})
}

// UncountedKeyStats lists the keys of ps's concurrency and rate policies
// with unknown counts (Waiting -1), for backends that cannot count messages
// per key.
func UncountedKeyStats(ps []Policy) []KeyStat {
	var out []KeyStat
	for _, p := range ps {
		if p.Kind.Keyed() {
			out = append(out, KeyStat{Kind: p.Kind, Key: p.Key, Waiting: -1})
		}
	}
	return out
}

// ReplacePolicy returns ps with p set (replacing the one of the same kind
// and key), or, when remove is true, without it, and whether one was there.
func ReplacePolicy(ps []Policy, p Policy, remove bool) ([]Policy, bool) {
	out := make([]Policy, 0, len(ps)+1)
	had := false
	for _, x := range ps {
		if x.Kind == p.Kind && x.Key == p.Key {
			had = true
			continue
		}
		out = append(out, x)
	}
	if !remove {
		out = append(out, p)
	}
	SortPolicies(out)
	return out, had
}

// KeyStatSet collects the KeyStats of one report. Backends seed it with the
// queue's policies, add what their engine counts, and return Sorted.
type KeyStatSet struct {
	m map[[2]string]*KeyStat
}

// NewKeyStatSet starts a report with an empty entry for the key of every
// concurrency and rate policy, so keys with a policy show even when idle.
func NewKeyStatSet(pols []Policy) *KeyStatSet {
	s := &KeyStatSet{m: map[[2]string]*KeyStat{}}
	for _, p := range pols {
		if p.Kind.Keyed() {
			s.Get(p.Kind, p.Key)
		}
	}
	return s
}

// Lookup returns the entry for kind and key, or nil when there is none.
func (s *KeyStatSet) Lookup(kind PolicyKind, key string) *KeyStat {
	return s.m[[2]string{string(kind), key}]
}

// Get returns the entry for kind and key, adding it when missing.
func (s *KeyStatSet) Get(kind PolicyKind, key string) *KeyStat {
	id := [2]string{string(kind), key}
	if s.m[id] == nil {
		s.m[id] = &KeyStat{Kind: kind, Key: key}
	}
	return s.m[id]
}

// Sorted returns the entries ordered by kind (as in PolicyKinds), then key.
func (s *KeyStatSet) Sorted() []KeyStat {
	out := make([]KeyStat, 0, len(s.m))
	for _, ks := range s.m {
		out = append(out, *ks)
	}
	SortKeyStats(out)
	return out
}

// SortKeyStats orders key statistics by kind (as in PolicyKinds), then key.
func SortKeyStats(ks []KeyStat) {
	slices.SortFunc(ks, func(a, b KeyStat) int {
		return cmp.Or(cmp.Compare(slices.Index(PolicyKinds, a.Kind), slices.Index(PolicyKinds, b.Kind)), cmp.Compare(a.Key, b.Key))
	})
}
