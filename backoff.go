package jobq

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bound"
)

// Backoff is a retry delay that doubles with every failed attempt, from
// Base up to Cap, with jitter: the n-th retry waits between half and all of
// min(Cap, Base·2^(n-1)). The zero Backoff means "not set": a task takes
// its queue's retry-backoff policy, and a queue without one takes
// the default: 10 seconds, doubling up to 10 minutes.
type Backoff struct {
	// Base is the first retry's delay. Zero with a Cap set means
	// the default base (10s), or Cap when that is shorter.
	Base time.Duration
	// Cap bounds every delay. Zero with a Base set means
	// the default cap (10m), or Base when that is longer.
	Cap time.Duration
}

// defaultRetryBackoff is the retry delay of a task whose queue has no
// retry-backoff policy: 10 seconds, doubling up to 10 minutes.
var defaultRetryBackoff = Backoff{Base: 10 * time.Second, Cap: 10 * time.Minute}

// maxBackoff bounds Backoff's durations and Task.TimeLimit: ten years,
// which the wire format's seconds carry exactly to the millisecond.
const maxBackoff = driver.MaxPolicyDuration

// IsZero reports whether b is not set.
func (b Backoff) IsZero() bool { return b.Base == 0 && b.Cap == 0 }

// filled returns b with a missing half taken from defaultRetryBackoff.
func (b Backoff) filled() Backoff {
	switch {
	case b.Base == 0:
		b.Base = min(defaultRetryBackoff.Base, b.Cap)
	case b.Cap == 0:
		b.Cap = max(defaultRetryBackoff.Cap, b.Base)
	}
	return b
}

// validate returns an InvalidArgument error naming the problem.
func (b Backoff) validate(op string) error {
	switch {
	case b.Base < 0 || b.Cap < 0:
		return errorf(errcode.InvalidArgument, op, "retry backoff %v,%v is negative; use durations such as 10s,1h", b.Base, b.Cap)
	case b.Base > maxBackoff || b.Cap > maxBackoff:
		return errorf(errcode.InvalidArgument, op, "retry backoff %v,%v is too long; keep each part within %v", b.Base, b.Cap, maxBackoff)
	case b.Cap != 0 && b.Base > b.Cap:
		return errorf(errcode.InvalidArgument, op, "retry backoff base %v is longer than its cap %v; write BASE,CAP with BASE first, for example 10s,1h", b.Base, b.Cap)
	}
	return nil
}

// Delay returns the delay before the retry that follows the failures-th
// failed attempt (1 for the first): min(Cap, Base·2^(failures-1)), less a
// random part of up to half of it, so that tasks that failed together do
// not all come back together. b's missing halves are the default's (10s, 10m).
func (b Backoff) Delay(failures int) time.Duration {
	b = b.filled()
	d := b.Base
	for i := 1; i < failures && d < b.Cap; i++ {
		d *= 2
	}
	d = min(d, b.Cap)
	if half := d / 2; half > 0 {
		d -= rand.N(half + 1)
	}
	return d
}

// String formats b as the CLI reads it ("BASE,CAP").
func (b Backoff) String() string { return bound.Format(b.Base) + "," + bound.Format(b.Cap) }

// parseBackoff reads a retry backoff written "BASE,CAP" (for example
// "10s,1h"; days and weeks allowed) or "BASE" alone, which keeps the
// default cap (or BASE when that is longer).
func parseBackoff(s string) (Backoff, error) {
	const op = "retry-backoff"
	base, capText, hasCap := strings.Cut(s, ",")
	var b Backoff
	var err error
	if b.Base, err = parsePolicyDuration("retry-backoff base", base); err != nil {
		return Backoff{}, err
	}
	if hasCap {
		if b.Cap, err = parsePolicyDuration("retry-backoff cap", capText); err != nil {
			return Backoff{}, err
		}
	}
	if b.Base == 0 {
		return Backoff{}, errorf(errcode.InvalidArgument, op, "retry-backoff base %q is zero; use a delay such as 10s (a tiny one, 1ms, retries almost at once)", base)
	}
	if err := b.validate(op); err != nil {
		return Backoff{}, err
	}
	return b.filled(), nil
}

// parsePolicyDuration reads a duration of a policy or task setting:
// Go's syntax with days and weeks, a bare number being seconds.
func parsePolicyDuration(what, s string) (time.Duration, error) {
	d, err := bound.Durations{Max: maxBackoff, BareSeconds: true}.Parse(what, s)
	if err != nil {
		return 0, errorf(errcode.InvalidArgument, "policy", "%v", err)
	}
	return d, nil
}

// retryBackoff is the backoff of a retry of this envelope's task: its own,
// else the queue's policy, else the default.
func (e *Envelope) retryBackoff(ctx context.Context) Backoff {
	if b := e.Task.RetryBackoff; !b.IsZero() { // the resolved task: a stashed one's wire form is a reference
		return b
	}
	if b := e.q.policies.retryBackoff(ctx); !b.IsZero() {
		return b
	}
	return defaultRetryBackoff
}

// failures counts this task's failed deliveries, this one included: from
// the attempt history where the message keeps one (failures and deliveries
// whose lease expired), otherwise from the deliveries that used up a retry.
func (e *Envelope) failures() int {
	if e.recordsAttempts() {
		n := 1
		for _, a := range withExpired(e.wire.Attempts, e.DeliveryCount) {
			if a.Outcome == OutcomeFailure || a.Outcome == OutcomeLeaseExpired {
				n++
			}
		}
		return n
	}
	return max(1, e.DeliveryCount-e.uncounted)
}
