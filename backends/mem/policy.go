package mem

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"time"

	"github.com/jobq/jobq/driver"
)

// gone is the state of a message that left the queue (completed,
// dead-lettered or cleared).
const gone state = -1

// policies are a store's queue policies and the counts that enforce them.
// Guarded by store.mu.
type policies struct {
	conc     map[string]int64            // concurrency key -> cap
	rate     map[string]driver.Policy    // rate key -> policy
	maxDepth int64                       // 0: unbounded
	queue    map[[2]string]driver.Policy // retention, retry-backoff, results, pause by kind and key: stored only
	inFlight map[string]int64            // concurrency key -> leased messages
	admitted map[string][]time.Time      // rate key -> claim times in the window, oldest first
}

func newPolicies() policies {
	return policies{
		conc:     map[string]int64{},
		rate:     map[string]driver.Policy{},
		inFlight: map[string]int64{},
		admitted: map[string][]time.Time{},
		queue:    map[[2]string]driver.Policy{},
	}
}

// setState moves m to st, keeping the per-key in-flight counts. Callers hold
// mu. A lease that ends frees a slot, so receivers are woken.
func (s *store) setState(m *message, st state) {
	if m.concKey != "" {
		if m.state == leased && st != leased {
			s.pol.inFlight[m.concKey]--
			if s.pol.inFlight[m.concKey] <= 0 {
				delete(s.pol.inFlight, m.concKey)
			}
			if _, capped := s.pol.conc[m.concKey]; capped {
				s.wake()
			}
		} else if m.state != leased && st == leased {
			s.pol.inFlight[m.concKey]++
		}
	}
	m.state = st
}

// window drops admissions older than the rate policy's period and returns
// those left. Callers hold mu.
func (s *store) window(key string, p driver.Policy, now time.Time) []time.Time {
	ts := s.pol.admitted[key]
	i := 0
	for i < len(ts) && !ts[i].After(now.Add(-p.Period)) {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(s.pol.admitted, key)
	} else {
		s.pol.admitted[key] = ts
	}
	return ts
}

// blocked reports whether claiming m now would exceed a cap or a rate.
// Callers hold mu.
func (s *store) blocked(m *message, now time.Time, conc, rate bool) bool {
	if conc && m.concKey != "" {
		if limit, ok := s.pol.conc[m.concKey]; ok && s.pol.inFlight[m.concKey] >= limit {
			return true
		}
	}
	if rate && m.rateKey != "" {
		if p, ok := s.pol.rate[m.rateKey]; ok && int64(len(s.window(m.rateKey, p, now))) >= p.Limit {
			return true
		}
	}
	return false
}

// admit records a claim of m against its rate policy. Callers hold mu.
func (s *store) admit(m *message, now time.Time) {
	if m.rateKey == "" {
		return
	}
	if _, ok := s.pol.rate[m.rateKey]; ok {
		s.pol.admitted[m.rateKey] = append(s.pol.admitted[m.rateKey], now)
	}
}

// rateFree is when the earliest full rate window admits again, or the zero
// time. Receivers that found only blocked messages sleep until then.
// Callers hold mu.
func (s *store) rateFree(now time.Time) time.Time {
	var at time.Time
	for key, p := range s.pol.rate {
		ts := s.window(key, p, now)
		if int64(len(ts)) < p.Limit || len(ts) == 0 {
			continue
		}
		free := ts[0].Add(p.Period)
		if at.IsZero() || free.Before(at) {
			at = free
		}
	}
	return at
}

// claimEligible leases the best ready message that no enforced policy
// blocks. Blocked messages keep their place. Callers hold mu and have
// called promote.
func (s *store) claimEligible(now time.Time, vis time.Duration, conc, rate bool) *message {
	if !conc && !rate || len(s.pol.conc)+len(s.pol.rate) == 0 {
		return s.claim(now, vis)
	}
	var skipped []*message
	defer func() {
		for _, m := range skipped {
			heap.Push(&s.readyQ, m)
		}
	}()
	for len(s.readyQ) > 0 {
		if !s.blocked(s.readyQ[0], now, conc, rate) {
			m := s.claim(now, vis)
			s.admit(m, now)
			return m
		}
		skipped = append(skipped, heap.Pop(&s.readyQ).(*message))
	}
	return nil
}

// depthCheck fails when storing msgs would exceed max-depth. Duplicates of
// queued or held task IDs (when dedup is on) do not count. Callers hold mu.
func (s *store) depthCheck(msgs []*driver.Message, dedup bool) error {
	if s.pol.maxDepth <= 0 {
		return nil
	}
	adding := len(msgs)
	if dedup {
		seen := map[string]bool{}
		adding = 0
		for _, m := range msgs {
			if m.ID != "" && (s.byTask[m.ID] != nil || s.heldMsgs[m.ID] != nil || seen[m.ID]) {
				continue
			}
			seen[m.ID] = true
			adding++
		}
	}
	depth := int64(len(s.msgs))
	if adding > 0 && depth+int64(adding) > s.pol.maxDepth {
		return driver.QueueFull(depth, s.pol.maxDepth, adding)
	}
	return nil
}

var _ driver.PolicyStore = (*Driver)(nil)

// SetPolicy implements driver.PolicyStore.
func (d *Driver) SetPolicy(ctx context.Context, p driver.Policy) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch p.Kind {
	case driver.ConcurrencyPolicy:
		s.pol.conc[p.Key] = p.Limit
	case driver.RatePolicy:
		s.pol.rate[p.Key] = p
	case driver.MaxDepthPolicy:
		s.pol.maxDepth = p.Limit
	default:
		s.pol.queue[[2]string{string(p.Kind), p.Key}] = p
	}
	s.wake() // a raised limit may unblock messages
	return nil
}

// UnsetPolicy implements driver.PolicyStore.
func (d *Driver) UnsetPolicy(ctx context.Context, kind driver.PolicyKind, key string) (bool, error) {
	if err := d.closing.Check(ctx); err != nil {
		return false, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var had bool
	switch kind {
	case driver.ConcurrencyPolicy:
		_, had = s.pol.conc[key]
		delete(s.pol.conc, key)
	case driver.RatePolicy:
		_, had = s.pol.rate[key]
		delete(s.pol.rate, key)
		delete(s.pol.admitted, key)
	case driver.MaxDepthPolicy:
		had = s.pol.maxDepth > 0
		s.pol.maxDepth = 0
	default:
		_, had = s.pol.queue[[2]string{string(kind), key}]
		delete(s.pol.queue, [2]string{string(kind), key})
	}
	s.wake()
	return had, nil
}

// ListPolicies implements driver.PolicyStore.
func (d *Driver) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []driver.Policy
	for k, n := range s.pol.conc {
		out = append(out, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: k, Limit: n})
	}
	for _, p := range s.pol.rate {
		out = append(out, p)
	}
	if s.pol.maxDepth > 0 {
		out = append(out, driver.Policy{Kind: driver.MaxDepthPolicy, Limit: s.pol.maxDepth})
	}
	for _, p := range s.pol.queue {
		out = append(out, p)
	}
	sortPolicies(out)
	return out, nil
}

// KeyStats implements driver.PolicyStore.
func (d *Driver) KeyStats(ctx context.Context) ([]driver.KeyStat, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.promote(now)
	conc, rate := map[string]*driver.KeyStat{}, map[string]*driver.KeyStat{}
	get := func(m map[string]*driver.KeyStat, kind driver.PolicyKind, key string) *driver.KeyStat {
		if m[key] == nil {
			m[key] = &driver.KeyStat{Kind: kind, Key: key}
		}
		return m[key]
	}
	for k := range s.pol.conc {
		get(conc, driver.ConcurrencyPolicy, k)
	}
	for k, n := range s.pol.inFlight {
		get(conc, driver.ConcurrencyPolicy, k).InFlight = n
	}
	for k, p := range s.pol.rate {
		get(rate, driver.RatePolicy, k).Admitted = int64(len(s.window(k, p, now)))
	}
	for _, m := range s.readyQ {
		if m.concKey != "" && conc[m.concKey] != nil {
			conc[m.concKey].Waiting++
		}
		if m.rateKey != "" && rate[m.rateKey] != nil {
			rate[m.rateKey].Waiting++
		}
	}
	out := make([]driver.KeyStat, 0, len(conc)+len(rate))
	for _, ks := range conc {
		out = append(out, *ks)
	}
	for _, ks := range rate {
		out = append(out, *ks)
	}
	slices.SortFunc(out, func(a, b driver.KeyStat) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), cmp.Compare(a.Key, b.Key))
	})
	return out, nil
}

func kindOrder(k driver.PolicyKind) int { return slices.Index(driver.PolicyKinds, k) }

func sortPolicies(ps []driver.Policy) {
	slices.SortFunc(ps, func(a, b driver.Policy) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), cmp.Compare(a.Key, b.Key))
	})
}
