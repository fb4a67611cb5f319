package jobq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bound"
)

// parsePolicy parses a policy as the CLI writes it: kind "concurrency" with
// spec "KEY=LIMIT", kind "rate" with spec "KEY=COUNT/PERIOD" (PERIOD a Go
// duration such as 30s or 1m, or a bare unit: s, m, h), kind "max-depth"
// with spec "N", kind "retention" with a duration such as "2d" (days and
// weeks allowed), kind "retry-backoff" with "BASE,CAP" such as "10s,1h",
// kind "results" with "all", "failed" or "none".
// Invalid values are InvalidArgument errors naming the problem.
func parsePolicy(kind, spec string) (driver.Policy, error) {
	const op = "policy"
	p := driver.Policy{Kind: driver.PolicyKind(strings.TrimSpace(kind))}
	spec = strings.TrimSpace(spec)
	switch p.Kind {
	case driver.ConcurrencyPolicy, driver.RatePolicy:
		key, val, ok := strings.Cut(spec, "=")
		if ok && key != strings.TrimSpace(key) {
			return driver.Policy{}, errorf(errcode.InvalidArgument, op, "%s policy %q: the key %q has spaces around it; write %s=%s", p.Kind, spec, key, strings.TrimSpace(key), strings.TrimSpace(val))
		}
		if !ok || key == "" {
			form := "KEY=LIMIT"
			if p.Kind == driver.RatePolicy {
				form = "KEY=COUNT/PERIOD"
			}
			return driver.Policy{}, errorf(errcode.InvalidArgument, op, "%s policy %q: write %s", p.Kind, spec, form)
		}
		p.Key = key
		count := val
		if p.Kind == driver.RatePolicy {
			var period string
			count, period, ok = strings.Cut(val, "/")
			if !ok {
				return driver.Policy{}, errorf(errcode.InvalidArgument, op, "rate policy %q has no period: write KEY=COUNT/PERIOD, for example %s=10/1m", spec, key)
			}
			d, err := parsePeriod(period)
			if err != nil {
				return driver.Policy{}, err
			}
			p.Period = d
		}
		n, err := parseLimit(p.Kind, count)
		if err != nil {
			return driver.Policy{}, err
		}
		p.Limit = n
	case driver.MaxDepthPolicy:
		n, err := parseLimit(p.Kind, spec)
		if err != nil {
			return driver.Policy{}, err
		}
		p.Limit = n
	case driver.RetentionPolicy:
		d, err := bound.Durations{Min: time.Second, Max: driver.MaxPolicyDuration, BareSeconds: true}.Parse("retention", spec)
		if err != nil {
			return driver.Policy{}, errorf(errcode.InvalidArgument, op, "%v", err)
		}
		p = driver.Retention(d)
	case driver.RetryBackoffPolicy:
		b, err := parseBackoff(spec)
		if err != nil {
			return driver.Policy{}, err
		}
		p = driver.RetryBackoff(b.Base, b.Cap)
	case driver.ResultsPolicy:
		m, err := driver.ParseResultsMode(spec)
		if err != nil {
			return driver.Policy{}, policyErr(op, err)
		}
		p = driver.KeepResults(m)
	default:
		return driver.Policy{}, errorf(errcode.InvalidArgument, op, "unknown policy kind %q: use concurrency, rate, max-depth, retention, retry-backoff or results", kind)
	}
	if err := validatePolicy(p); err != nil {
		return driver.Policy{}, policyErr(op, err)
	}
	return p, nil
}

// validatePolicy is Policy.Validate plus the portable layer's rule on keys
// (validateKey).
func validatePolicy(p driver.Policy) error {
	if err := validateKey(string(p.Kind)+" key", p.Key); err != nil {
		return err
	}
	return p.Validate()
}

// validateKey is driver.ValidateKey plus UTF-8: a key that is not valid
// UTF-8 cannot round-trip through every backend (Azure keeps policies in
// JSON metadata and hands back U+FFFD in its place), so a policy set with
// it would never match its tasks.
func validateKey(what, key string) error {
	if !utf8.ValidString(key) {
		return driver.Errorf(errcode.InvalidArgument, "%s %q is not valid UTF-8 text; use UTF-8 (for example plain ASCII letters, digits, - and _)", what, key)
	}
	return driver.ValidateKey(what, key)
}

func parseLimit(kind driver.PolicyKind, s string) (int64, error) {
	n, err := bound.Ints{Min: math.MinInt64, Max: math.MaxInt64}.Parse(string(kind)+" limit", s)
	if err != nil {
		// Read again in the range a limit takes, for the error to say it.
		_, err = bound.Ints{Min: 1, Max: math.MaxInt64}.Parse(string(kind)+" limit", s)
		return 0, errorf(errcode.InvalidArgument, "policy", "%v", err)
	}
	if n <= 0 {
		return 0, errorf(errcode.InvalidArgument, "policy", "%s limit is %d; it must be positive (use `policy unset` to remove a limit)", kind, n)
	}
	return n, nil
}

// parsePeriod reads a rate window: a Go duration or a bare unit.
func parsePeriod(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "ms", "s", "m", "h":
		s = "1" + s
	}
	lower := strings.ToLower(s)
	if strings.Contains(lower, "inf") || strings.Contains(lower, "nan") {
		return 0, errorf(errcode.InvalidArgument, "policy", "rate period %q is not finite; use a duration such as 1s, 1m or 1h", s)
	}
	// Negative and zero periods get the message below.
	d, err := bound.Durations{Min: -bound.MaxDuration}.Parse("rate period", s)
	if err != nil {
		return 0, errorf(errcode.InvalidArgument, "policy", "%v", err)
	}
	if d <= 0 || d == math.MaxInt64 {
		return 0, errorf(errcode.InvalidArgument, "policy", "rate period %v must be positive and finite", d)
	}
	return d, nil
}

// policyErr turns a driver validation error into an *Error.
func policyErr(op string, err error) error {
	return &Error{Code: errcode.Of(err), Op: op, Msg: err.Error()}
}

// policyStore returns the driver's policy store or an Unimplemented error.
func (p *Admin) policyStore(op string) (driver.PolicyStore, error) {
	if err := p.q.checkOpen(op); err != nil {
		return nil, err
	}
	ps, ok := p.q.drv.(driver.PolicyStore)
	if !ok {
		return nil, &Error{Code: errcode.Unimplemented, Op: op, Queue: p.q.url,
			Msg: "backend " + p.q.backend() + " keeps no queue policies (concurrency, rate, max-depth); run `jobq backends` to see which backends do"}
	}
	return ps, nil
}

// feature is the capability a policy kind needs; "" for max-depth, which
// every policy store enforces.
func policyFeature(k driver.PolicyKind) driver.Feature {
	switch k {
	case driver.ConcurrencyPolicy:
		return driver.ConcurrencyLimit
	case driver.RatePolicy:
		return driver.RateLimit
	}
	return ""
}

// SetPolicy validates and stores a policy, replacing the one of the same kind and
// key. A concurrency or rate policy on a backend that declares the feature
// Unsupported fails with Unimplemented; one that declares it Emulated logs
// the fallback once (the worker enforces it per process).
func (p *Admin) SetPolicy(ctx context.Context, pol driver.Policy) error {
	const op = "policy set"
	if pol.Kind == driver.PausePolicy {
		return errorf(errcode.InvalidArgument, op, "a pause is set with Admin.Pause (`jobq QUEUE pause`), which records who paused and when")
	}
	if isScheduleKind(pol.Kind) {
		return errorf(errcode.InvalidArgument, op, "a schedule is added with Admin.AddSchedule (`jobq QUEUE schedule add`)")
	}
	if err := validatePolicy(pol); err != nil {
		return policyErr(op, err)
	}
	ps, err := p.policyStore(op)
	if err != nil {
		return err
	}
	if f := policyFeature(pol.Kind); f != "" {
		if err := p.q.degrade(op, f); err != nil {
			return err
		}
	}
	if pol.Kind == driver.ResultsPolicy && driver.ResultsMode(pol.Limit) == driver.ResultsNone {
		if err := p.q.checkNoRecordsNeeded(ctx, op); err != nil {
			return err
		}
	}
	err = ps.SetPolicy(ctx, pol)
	p.q.policies.invalidate()
	return p.q.wrapWrite(op, err)
}

// UnsetPolicy removes the policy of that kind and key and reports whether there
// was one.
func (p *Admin) UnsetPolicy(ctx context.Context, kind driver.PolicyKind, key string) (bool, error) {
	const op = "policy unset"
	if kind == driver.PausePolicy {
		return false, errorf(errcode.InvalidArgument, op, "a pause is lifted with Admin.Resume (`jobq QUEUE resume [--kind K] [--key K]`)")
	}
	if isScheduleKind(kind) {
		return false, errorf(errcode.InvalidArgument, op, "a schedule is removed with Admin.RemoveSchedule (`jobq QUEUE schedule rm NAME`)")
	}
	if !isPolicyKind(kind) {
		return false, errorf(errcode.InvalidArgument, op, "unknown policy kind %q: use concurrency, rate, max-depth, retention, retry-backoff or results", kind)
	}
	if !kind.Keyed() && key != "" {
		return false, errorf(errcode.InvalidArgument, op, "%s takes no key (got %q)", kind, key)
	}
	if kind.Keyed() && key == "" {
		return false, errorf(errcode.InvalidArgument, op, "unsetting a %s policy needs its key", kind)
	}
	ps, err := p.policyStore(op)
	if err != nil {
		return false, err
	}
	ok, err := ps.UnsetPolicy(ctx, kind, key)
	p.q.policies.invalidate()
	return ok, p.q.wrapWrite(op, err)
}

// Policies returns every policy of the queue, sorted by kind then key,
// except the schedules (which Schedules lists).
func (p *Admin) Policies(ctx context.Context) ([]driver.Policy, error) {
	const op = "policy list"
	ps, err := p.policyStore(op)
	if err != nil {
		return nil, err
	}
	pols, err := ps.ListPolicies(ctx)
	pols = slices.DeleteFunc(pols, func(pol driver.Policy) bool { return isScheduleKind(pol.Kind) })
	return pols, p.q.wrap(op, err)
}

// PolicyKeyStats reports per-key in-flight and admission counts for every key
// with a policy or a leased message.
func (p *Admin) PolicyKeyStats(ctx context.Context) ([]driver.KeyStat, error) {
	const op = "stats"
	ps, err := p.policyStore(op)
	if err != nil {
		return nil, err
	}
	ks, err := ps.KeyStats(ctx)
	return ks, p.q.wrap(op, err)
}

func isPolicyKind(k driver.PolicyKind) bool {
	for _, x := range driver.PolicyKinds {
		if x == k {
			return true
		}
	}
	return false
}

// checkKeys validates a task's policy keys and applies the declared level of
// the features they need: Unimplemented when unsupported, one WARN when
// emulated (the worker then enforces them per process).
func (q *Queue) checkKeys(op string, t *Task) error {
	for _, k := range []struct {
		what, key string
		f         driver.Feature
	}{{"concurrency key", t.ConcurrencyKey, driver.ConcurrencyLimit}, {"rate-limit key", t.RateLimitKey, driver.RateLimit}} {
		if k.key == "" {
			continue
		}
		if err := validateKey(k.what, k.key); err != nil {
			return policyErr(op, err)
		}
		if err := q.degrade(op, k.f); err != nil {
			return err
		}
	}
	return nil
}

// PushOptions are the settings of PushBatch and PushTx. The zero value
// fails a push that a max-depth policy refuses with ResourceExhausted.
type PushOptions struct {
	// WaitForRoom makes a push that the queue's max-depth refuses wait, with
	// exponential backoff, until there is room or the context ends, instead
	// of failing with ResourceExhausted. A batch larger than the bound itself
	// can never fit and fails at once. Defaults to false.
	WaitForRoom bool
	// MaxBackoff caps the pause between attempts of WaitForRoom. Defaults to
	// 5 seconds.
	MaxBackoff time.Duration
	// OnFull, when set, is called before each pause of WaitForRoom with the
	// refusal, so that callers can report that they are waiting. Defaults to
	// nil.
	OnFull func(*driver.QueueFullError, time.Duration)
	// StopWaiting, when closed, ends a WaitForRoom wait at its next pause
	// (or during it) with the refusal, as the end of the context would, but
	// never interrupts an attempt in progress: nothing is left of unknown
	// outcome. A CLI closes it on a first Ctrl-C. Defaults to nil: only the
	// context ends the wait.
	StopWaiting <-chan struct{}
	// Position asks for PushResult.Position, which costs a count of the
	// queue's ready tasks before the push (one more round trip), on
	// backends whose counts are exact. PushTx ignores it. Defaults to false:
	// Position is -1.
	Position bool
	// UniqueFor, when positive, refuses as a duplicate (PushResult.Duplicate,
	// nothing stored) a task whose ID has a result record of an end
	// (succeeded, dead-lettered, cancelled) written within UniqueFor before
	// the push, besides one queued now, which the backend's dedup catches
	// where it has one (the Dedup feature; elsewhere a task still queued is
	// queued again). It costs one read of the result records per batch and
	// needs a backend that keeps them (the Results feature) and a results
	// policy other than none; records expire after the queue's retention,
	// so a window longer than it covers the retention only. PushTx refuses
	// it. Defaults to 0: only the backend's dedup applies.
	UniqueFor time.Duration
	// SkipSucceeded leaves out (PushResult.Skipped, nothing stored) a task
	// whose ID has a succeeded result record, kept for the queue's
	// retention: pushing a sweep again after a partial failure pushes only
	// what did not succeed. Task IDs are deterministic, so the same task
	// has the same ID (its group aside, which is not part of it). It
	// costs one read of the result records per batch and needs what
	// UniqueFor needs. PushTx refuses it. Defaults to false.
	SkipSucceeded bool
}

// waitForRoom runs push once, or, with opts.WaitForRoom, until max-depth
// stops refusing it.
func (q *Queue) waitForRoom(ctx context.Context, opts PushOptions, push func() ([]PushResult, error)) ([]PushResult, error) {
	if !opts.WaitForRoom {
		return push()
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = opts.MaxBackoff
	if b.MaxInterval <= 0 {
		b.MaxInterval = 5 * time.Second
	}
	b.MaxElapsedTime = 0 // the context bounds the wait
	b.Reset()
	for {
		res, err := push()
		var qf *driver.QueueFullError
		if err == nil || !errors.As(err, &qf) || len(res) > 0 {
			return res, err
		}
		if int64(qf.Adding) > qf.MaxDepth {
			return nil, &Error{Code: errcode.ResourceExhausted, Op: "push", Queue: q.url, Err: err,
				Msg: fmt.Sprintf("a batch of %d tasks can never fit under max-depth %d: push fewer at a time", qf.Adding, qf.MaxDepth)}
		}
		pause := b.NextBackOff()
		if opts.OnFull != nil {
			opts.OnFull(qf, pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &Error{Code: errcode.Of(ctx.Err()), Op: "push", Queue: q.url, Err: errors.Join(ctx.Err(), err),
				Msg: "gave up waiting for room in the queue: " + qf.Error()}
		case <-opts.StopWaiting:
			t.Stop()
			return nil, &Error{Code: errcode.ResourceExhausted, Op: "push", Queue: q.url, Err: err,
				Msg: "stopped waiting for room in the queue: " + qf.Error()}
		case <-t.C:
		}
	}
}
