package mem

import (
	"context"
	"slices"

	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Driver is one open handle on a queue of the process. It implements
// driver.Driver; build it with New, or open it from a mem:// URL.
type Driver struct {
	s    *store
	name string
	caps driver.Capabilities

	closing *driver.Closing
}

var _ driver.Driver = (*Driver)(nil)

func (d *Driver) level(f driver.Feature) driver.Level { return d.caps.Level(f) }

func unimplemented(f driver.Feature) error {
	return driver.Errorf(errcode.Unimplemented, "mem: this queue was opened with %s unsupported", f)
}

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

// Push implements driver.Driver.
func (d *Driver) Push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if mp := d.caps.MaxPushBatch; mp > 0 && len(msgs) > mp {
		return nil, driver.Errorf(errcode.InvalidArgument, "mem: push of %d messages exceeds the batch limit of %d", len(msgs), mp)
	}
	for _, m := range msgs {
		if d.caps.MaxMessageBytes > 0 && len(m.Body) > d.caps.MaxMessageBytes {
			return nil, driver.Errorf(errcode.TooLarge, "mem: message of %d bytes exceeds the limit of %d bytes", len(m.Body), d.caps.MaxMessageBytes)
		}
	}
	dedup := d.level(driver.Dedup)
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.depthCheck(msgs, dedup != driver.Unsupported); err != nil {
		return nil, err
	}
	out := make([]driver.PushResult, len(msgs))
	for i, in := range msgs {
		if dedup != driver.Unsupported && in.ID != "" {
			if old := s.byTask[in.ID]; old != nil {
				// Emulated dedup drops silently, as Service Bus does.
				out[i] = driver.PushResult{MessageID: old.id, Duplicate: dedup == driver.Native}
				continue
			}
			if s.heldMsgs[in.ID] != nil {
				// A held ID is a duplicate too, as for Hold (driver/held.go).
				out[i] = driver.PushResult{MessageID: in.ID, Duplicate: dedup == driver.Native}
				continue
			}
		}
		m := d.store(in, now)
		s.countPush(m.group, now)
		out[i] = driver.PushResult{MessageID: m.id}
	}
	return out, nil
}

// store queues in as Push stores it (priority and delay as declared) and
// returns the stored message; the caller holds s.mu and counts its group.
func (d *Driver) store(in *driver.Message, now time.Time) *message {
	m := &message{
		taskID:     in.ID,
		body:       slices.Clone(in.Body),
		enqueuedAt: now,
		concKey:    in.ConcurrencyKey,
		rateKey:    in.RateLimitKey,
		trace:      in.TraceParent,
		group:      in.Group,
	}
	if d.level(driver.Priority) != driver.Unsupported {
		m.priority = in.Priority
	}
	notBefore := in.NotBefore
	if d.level(driver.DelayedPush) != driver.Native {
		notBefore = time.Time{}
	}
	d.s.add(m, notBefore, now)
	return m
}

// Receive implements driver.Driver.
func (d *Driver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if mr := d.caps.MaxReceiveBatch; mr > 0 && p.Max > mr {
		return nil, driver.Errorf(errcode.InvalidArgument, "mem: receive of %d messages exceeds the batch limit of %d", p.Max, mr)
	}
	if mv := d.caps.MaxVisibility; mv > 0 && p.Visibility > mv {
		return nil, driver.Errorf(errcode.InvalidArgument, "mem: visibility %v exceeds the maximum of %v", p.Visibility, mv)
	}
	if p.Max < 1 || p.Visibility <= 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "mem: receive needs Max >= 1 and a positive visibility (got %d, %v)", p.Max, p.Visibility)
	}
	deadline := time.Now().Add(p.Wait)
	s := d.s
	for {
		now := time.Now()
		s.mu.Lock()
		s.promote(now)
		var out []*driver.Received
		for len(out) < p.Max {
			m := s.claimEligible(now, p.Visibility, d.level(driver.ConcurrencyLimit) == driver.Native, d.level(driver.RateLimit) == driver.Native)
			if m == nil {
				break
			}
			out = append(out, &driver.Received{
				ID:            m.taskID,
				Body:          slices.Clone(m.body),
				DeliveryCount: m.deliveries,
				EnqueuedAt:    m.enqueuedAt,
				TraceParent:   m.trace,
				Group:         m.group,
				// Reported whatever the in-place level: the portable layer
				// reads it only where the budget is counted by deliveries.
				UncountedDeliveries: m.uncounted,
				Lease:               driver.Lease{MessageID: m.id, Token: m.token, Expiry: m.due},
			})
		}
		changed, next := s.changed, s.nextDue()
		s.mu.Unlock()
		if len(out) > 0 || !now.Before(deadline) {
			return out, nil
		}
		sleep := deadline.Sub(now)
		if !next.IsZero() && next.Sub(now) < sleep {
			sleep = max(next.Sub(now), time.Millisecond)
		}
		t := time.NewTimer(sleep)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-d.closing.Done():
			t.Stop()
			return nil, d.closing.Err()
		}
		t.Stop()
	}
}

// Renew implements driver.Driver.
func (d *Driver) Renew(ctx context.Context, lease driver.Lease, vis time.Duration) (driver.Lease, error) {
	if err := d.closing.Check(ctx); err != nil {
		return driver.Lease{}, err
	}
	if d.level(driver.LeaseRenewal) == driver.Unsupported {
		return driver.Lease{}, unimplemented(driver.LeaseRenewal)
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.held(lease.MessageID, lease.Token, now)
	if m == nil {
		return driver.Lease{}, lockLost(lease)
	}
	s.makeTimed(m, leased, now.Add(vis))
	lease.Expiry = m.due
	return lease, nil
}

func lockLost(l driver.Lease) error {
	return driver.Errorf(errcode.LockLost, "mem: lease on message %s is no longer held (expired, settled, or claimed again)", l.MessageID)
}

// settle runs fn for each held lease under the store's lock, following the
// batch error convention. result(i) is the record to store with the
// settlement of i (nil for none); one is stored only when fn succeeded,
// and waiters are woken.
func (d *Driver) settle(ctx context.Context, n int, lease func(i int) driver.Lease, result func(i int) *driver.ResultRecord,
	tally func(i int) driver.GroupTally, fn func(i int, m *message, now time.Time) error) []error {
	if err := d.closing.Check(ctx); err != nil {
		return driver.FanOut(err, n)
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	stored := false
	for i := range n {
		l, rec := lease(i), result(i)
		var err error
		if rec != nil {
			err = d.storable(rec)
		}
		if err == nil {
			if m := s.held(l.MessageID, l.Token, now); m == nil {
				err = lockLost(l)
			} else {
				err = fn(i, m, now)
			}
		}
		if err == nil && rec != nil {
			s.putResult(rec, now)
			stored = true
		}
		if err == nil {
			s.tally(tally(i), now)
		}
		if err != nil {
			if errs == nil {
				errs = make([]error, n)
			}
			errs[i] = err
		}
	}
	if stored {
		s.wakeResults()
	}
	return errs
}

// Complete implements driver.Driver.
func (d *Driver) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	return d.settle(ctx, len(reqs), func(i int) driver.Lease { return reqs[i].Lease },
		func(i int) *driver.ResultRecord { return reqs[i].Result },
		func(i int) driver.GroupTally { return reqs[i].Tally },
		func(_ int, m *message, _ time.Time) error {
			d.s.remove(m)
			return nil
		})
}

// Requeue implements driver.Driver.
func (d *Driver) Requeue(ctx context.Context, reqs []driver.RequeueParams) []error {
	s := d.s
	return d.settle(ctx, len(reqs), func(i int) driver.Lease { return reqs[i].Lease }, noResult,
		func(i int) driver.GroupTally { return reqs[i].Tally },
		func(i int, m *message, now time.Time) error {
			r := reqs[i]
			if r.Body != nil && d.level(driver.InPlaceUpdate) == driver.Native {
				m.body = slices.Clone(r.Body)
			}
			if !r.Failed {
				m.uncounted++
			}
			if r.Delay > 0 && d.level(driver.DelayedRequeue) == driver.Native {
				s.makeTimed(m, waiting, now.Add(r.Delay))
			} else {
				s.makeReady(m, now)
			}
			s.wake() // waiting receivers recompute when to look again
			return nil
		})
}

func noResult(int) *driver.ResultRecord { return nil }

// DeadLetter implements driver.Driver.
func (d *Driver) DeadLetter(ctx context.Context, reqs []driver.DeadLetterParams) []error {
	if d.level(driver.DeadLetter) == driver.Unsupported && !d.closing.Closed() {
		return driver.FanOut(unimplemented(driver.DeadLetter), len(reqs))
	}
	return d.settle(ctx, len(reqs), func(i int) driver.Lease { return reqs[i].Lease },
		func(i int) *driver.ResultRecord { return reqs[i].Result },
		func(i int) driver.GroupTally { return reqs[i].Tally },
		func(i int, m *message, now time.Time) error {
			d.s.deadLetter(m, reqs[i], now, d.level(driver.InPlaceUpdate) == driver.Native)
			return nil
		})
}

// deadLetter moves the held message m to the dead letters; inPlace says
// whether the request's body replaces m's. Callers hold mu.
func (s *store) deadLetter(m *message, req driver.DeadLetterParams, now time.Time, inPlace bool) {
	s.remove(m)
	if req.Body != nil && inPlace {
		m.body = slices.Clone(req.Body)
	}
	s.dead = append(s.dead, &deadMessage{m: m, reason: req.Reason, detail: req.Detail, deadAt: now})
}

// Peek implements driver.Driver. Messages come in the order they would be
// received: ready ones by priority and push order, then the others by the
// time they become visible.
func (d *Driver) Peek(ctx context.Context, max int) ([]*driver.PeekedMessage, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if d.level(driver.Peek) == driver.Unsupported {
		return nil, unimplemented(driver.Peek)
	}
	if mp := d.caps.MaxPeek; mp > 0 && max > mp {
		return nil, driver.Errorf(errcode.InvalidArgument, "mem: peek of %d messages exceeds the limit of %d", max, mp)
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.promote(time.Now())
	all := make([]*message, 0, len(s.msgs))
	for _, m := range s.msgs {
		all = append(all, m)
	}
	slices.SortFunc(all, func(a, b *message) int {
		if (a.state == ready) != (b.state == ready) {
			if a.state == ready {
				return -1
			}
			return 1
		}
		if a.state != ready {
			if c := a.due.Compare(b.due); c != 0 {
				return c
			}
		} else if a.priority != b.priority {
			return b.priority - a.priority
		}
		return int(a.seq) - int(b.seq)
	})
	all = all[:min(max, len(all))]
	out := make([]*driver.PeekedMessage, len(all))
	for i, m := range all {
		out[i] = &driver.PeekedMessage{
			MessageID:     m.id,
			ID:            m.taskID,
			Body:          slices.Clone(m.body),
			DeliveryCount: m.deliveries,
			EnqueuedAt:    m.enqueuedAt,
			VisibleAt:     m.due,
			InFlight:      m.state == leased,
			Priority:      m.priority,
		}
	}
	return out, nil
}

// Stats implements driver.Driver. Counts are always exact.
func (d *Driver) Stats(ctx context.Context) (driver.Stats, error) {
	if err := d.closing.Check(ctx); err != nil {
		return driver.Stats{}, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.promote(time.Now())
	st := driver.Stats{Known: driver.KnownCounts{Ready: true, InFlight: true, Delayed: true, Dead: true}}
	for _, m := range s.msgs {
		switch m.state {
		case ready:
			st.Ready++
		case leased:
			st.InFlight++
		case waiting:
			st.Delayed++
		}
	}
	st.Dead = int64(len(s.dead))
	if d.level(driver.DeadLetter) == driver.Unsupported {
		st.Dead, st.Known.Dead = 0, false
	}
	return st, nil
}

// Clear implements driver.Driver: ready and delayed messages go; leased
// ones and dead letters stay.
func (d *Driver) Clear(ctx context.Context) (int64, error) {
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.promote(time.Now())
	var n int64
	for _, m := range s.msgs {
		if m.state != leased {
			s.remove(m)
			n++
		}
	}
	s.readyQ = nil
	return n, nil
}

// ListDead implements driver.Driver.
func (d *Driver) ListDead(ctx context.Context, max int) ([]*driver.DeadMessage, error) {
	if err := d.checkDead(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*driver.DeadMessage, 0, min(max, len(s.dead)))
	for _, dm := range s.dead[:min(max, len(s.dead))] {
		out = append(out, &driver.DeadMessage{
			MessageID:     dm.m.id,
			ID:            dm.m.taskID,
			Body:          slices.Clone(dm.m.body),
			Reason:        dm.reason,
			Detail:        dm.detail,
			DeliveryCount: dm.m.deliveries,
			DeadAt:        dm.deadAt,
		})
	}
	return out, nil
}

func (d *Driver) checkDead(ctx context.Context) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if d.level(driver.DeadLetter) == driver.Unsupported {
		return unimplemented(driver.DeadLetter)
	}
	return nil
}

// takeDead removes the named dead letters (all when ids is nil). Callers
// hold mu.
func (s *store) takeDead(ids []string) []*deadMessage {
	var taken, kept []*deadMessage
	for _, dm := range s.dead {
		if ids == nil || slices.Contains(ids, dm.m.id) {
			taken = append(taken, dm)
		} else {
			kept = append(kept, dm)
		}
	}
	s.dead = kept
	return taken
}

// RequeueDead implements driver.Driver. A requeued dead letter starts over:
// a new message ID, visible at once, its delivery count reset.
func (d *Driver) RequeueDead(ctx context.Context, ids []string) (int64, error) {
	if err := d.checkDead(ctx); err != nil {
		return 0, err
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	taken := s.takeDead(ids)
	for _, dm := range taken {
		old := dm.m
		if old.taskID != "" && s.byTask[old.taskID] != nil && d.level(driver.Dedup) == driver.Native {
			// Its task is queued or running again: the letter merges
			// into that message (a second copy would run the task twice).
			continue
		}
		m := &message{taskID: old.taskID, body: old.body, priority: old.priority, enqueuedAt: old.enqueuedAt,
			concKey: old.concKey, rateKey: old.rateKey, group: old.group}
		s.reopen(m.group, now)
		if d.level(driver.InPlaceUpdate) == driver.Native {
			m.deliveries = old.deliveries // the next delivery counts on
		}
		s.add(m, time.Time{}, now)
		// The dead letter's record ends the old run; the task waits for
		// its new one.
		delete(s.res.recs, old.taskID)
	}
	if len(taken) > 0 {
		s.wakeResults()
	}
	return int64(len(taken)), nil
}

// PurgeDead implements driver.Driver.
func (d *Driver) PurgeDead(ctx context.Context, ids []string) (int64, error) {
	if err := d.checkDead(ctx); err != nil {
		return 0, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.takeDead(ids))), nil
}

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) errcode.Code { return errcode.Of(err) }

// As implements driver.Driver; mem supports no targets.
func (d *Driver) As(any) bool { return false }

// Close implements driver.Driver. The store lives on for other handles.
func (d *Driver) Close() error {
	d.closing.Close()
	return nil
}
