package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// FailureBackoff pauses a worker after consecutive task failures, so that a
// broken dependency (a licence server, a full disk) is not hammered: after
// the n-th failure in a row the worker takes no new task for
// Base·2^(n-1), at most Max. A success resets it. It works alongside
// Options.MaxConsecutiveFailures, which ends the worker instead.
type FailureBackoff struct {
	// Base is the pause after the first failure. Zero disables the
	// backoff.
	Base time.Duration
	// Max caps the pause. Defaults to 5 minutes.
	Max time.Duration
}

// failurePauser is a worker's failure backoff state.
type failurePauser struct {
	cfg   FailureBackoff
	mu    sync.Mutex
	bo    *backoff.ExponentialBackOff
	until time.Time
}

func newFailurePauser(cfg FailureBackoff) *failurePauser {
	if cfg.Base <= 0 {
		return &failurePauser{}
	}
	if cfg.Max <= 0 {
		cfg.Max = 5 * time.Minute
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = cfg.Base
	bo.MaxInterval = max(cfg.Max, cfg.Base)
	bo.Multiplier = 2
	bo.RandomizationFactor = 0 // the pause is documented as Base·2^(n-1)
	bo.MaxElapsedTime = 0
	bo.Reset()
	return &failurePauser{cfg: cfg, bo: bo}
}

// record notes a task outcome and returns the pause a failure starts (zero
// for a success, or when the backoff is off).
func (p *failurePauser) record(success bool) time.Duration {
	if p.bo == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if success {
		p.bo.Reset()
		p.until = time.Time{}
		return 0
	}
	d := p.bo.NextBackOff()
	p.until = time.Now().Add(d)
	return d
}

// left is how long the current pause still runs.
func (p *failurePauser) left() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Until(p.until)
}

// pauseAfterFailures waits out a failure pause before the worker receives
// again. It returns true when the worker drains, or quit is closed,
// meanwhile.
func (w *Worker) pauseAfterFailures(quit <-chan struct{}) bool {
	d := w.pauser.left()
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false
	case <-w.drainCh:
		return true
	case <-quit:
		return true
	}
}

// noteOutcome feeds the failure backoff; failed is a real task failure
// (not a lost lease or a stop).
func (w *Worker) noteOutcome(success, failed bool, streak int, log *slog.Logger) {
	if !success && !failed {
		return
	}
	if d := w.pauser.record(success); d > 0 {
		log.Warn("tasks are failing: pausing before taking more work", "consecutive_failures", streak, "pause", d.Round(time.Millisecond))
	}
}

// localLimits enforces concurrency and rate policies inside this process,
// for backends that declare them Emulated: the engine cannot refuse a claim,
// so the worker puts a blocked task back with a short delay instead
// (without using up a retry). Limits then hold per worker process, not
// across workers.
type localLimits struct {
	q          *jobq.Queue
	log        *slog.Logger
	conc, rate bool

	mu       sync.Mutex
	loaded   time.Time
	policies map[[2]string]driver.Policy
	inFlight map[string]int64
	admitted map[string][]time.Time
}

// policyRefresh is how often the worker rereads the queue's policies.
const policyRefresh = 30 * time.Second

// blockedDelay is the shortest delay a blocked task is put back with.
const blockedDelay = time.Second

func newLocalLimits(q *jobq.Queue, log *slog.Logger) *localLimits {
	caps := q.Capabilities()
	return &localLimits{
		q: q, log: log,
		conc:     caps.Level(driver.ConcurrencyLimit) == driver.Emulated,
		rate:     caps.Level(driver.RateLimit) == driver.Emulated,
		inFlight: map[string]int64{},
		admitted: map[string][]time.Time{},
	}
}

// refresh rereads the policies when they are older than policyRefresh.
// Callers hold mu.
func (l *localLimits) refresh(ctx context.Context) {
	if time.Since(l.loaded) < policyRefresh && l.policies != nil {
		return
	}
	l.loaded = time.Now()
	pols, err := l.q.Admin().Policies(ctx)
	if err != nil {
		if l.policies == nil {
			l.log.Warn("cannot read the queue's policies; concurrency and rate keys are not enforced by this worker", "error", err)
		}
		l.policies = map[[2]string]driver.Policy{}
		return
	}
	l.policies = make(map[[2]string]driver.Policy, len(pols))
	for _, p := range pols {
		l.policies[[2]string{string(p.Kind), p.Key}] = p
	}
}

// acquire admits t or returns how long to put it back for. A nil release
// with a zero delay means the task is not limited here.
func (l *localLimits) acquire(ctx context.Context, t *jobq.Task) (release func(), delay time.Duration) {
	if (!l.conc || t.ConcurrencyKey == "") && (!l.rate || t.RateLimitKey == "") {
		return func() {}, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refresh(ctx)
	now := time.Now()
	var cp, rp driver.Policy
	var capped, limited bool
	if l.conc && t.ConcurrencyKey != "" {
		cp, capped = l.policies[[2]string{string(driver.ConcurrencyPolicy), t.ConcurrencyKey}]
		if capped && l.inFlight[t.ConcurrencyKey] >= cp.Limit {
			return nil, blockedDelay
		}
	}
	if l.rate && t.RateLimitKey != "" {
		rp, limited = l.policies[[2]string{string(driver.RatePolicy), t.RateLimitKey}]
		if limited {
			ts := l.admitted[t.RateLimitKey]
			for len(ts) > 0 && !ts[0].After(now.Add(-rp.Period)) {
				ts = ts[1:]
			}
			l.admitted[t.RateLimitKey] = ts
			if int64(len(ts)) >= rp.Limit {
				return nil, max(blockedDelay, time.Until(ts[0].Add(rp.Period)))
			}
			l.admitted[t.RateLimitKey] = append(ts, now)
		}
	}
	if !capped {
		return func() {}, 0
	}
	key := t.ConcurrencyKey
	l.inFlight[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.inFlight[key]--
			l.mu.Unlock()
		})
	}, 0
}
