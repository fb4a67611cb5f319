package jobq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/cronslot"
)

// ScheduleOptions are the settings of Admin.AddSchedule. The zero value
// reads the cron expression in UTC and skips missed slots.
type ScheduleOptions struct {
	// TimeZone is the IANA zone the cron expression is read in, such as
	// Europe/Berlin (daylight saving included). Defaults to UTC.
	TimeZone string
	// Missed says what happens to slots that pass while no worker or
	// scheduler runs: driver.MissedSkip fires only slots that are due
	// (within driver.ScheduleLateness of their time), driver.MissedOnce
	// fires one catch-up run for the latest missed slot. Defaults to
	// driver.MissedSkip.
	Missed driver.MissedPolicy
	// Paused adds the schedule paused: it fires nothing until
	// Admin.ResumeSchedule. Defaults to false.
	Paused bool
}

// AddSchedule adds a recurring schedule named name: at every slot of the
// cron expression (five fields, or a descriptor such as @hourly) a copy of
// t is pushed, with the slot's own ID (driver.ScheduleTaskID). Any running
// worker (worker.Options.NoSchedules unset) or `jobq QUEUE scheduler`
// fires due slots; each slot is pushed once however many of them run (see
// the Schedules capability for each backend's guarantee). t must have no
// ID and no NotBefore. A name the queue already has (or another call adds
// at the same moment) fails with AlreadyExists, one being removed with
// FailedPrecondition.
func (p *Admin) AddSchedule(ctx context.Context, name, cron string, t *Task, o ScheduleOptions) (driver.ScheduleSpec, error) {
	const op = "schedule add"
	spec, err := newScheduleSpec(name, cron, t, o)
	if err != nil {
		return spec, policyErr(op, err)
	}
	ps, err := p.scheduleStore(op)
	if err != nil {
		return spec, err
	}
	spec.Since = time.Now().Truncate(time.Millisecond)
	// The firing state starts at the add's time, so that a scheduler still
	// holding the state of a removed schedule of this name expects another
	// value: its claim fails rather than fire the old definition.
	won, err := swapFired(ctx, ps, driver.FiredState{Name: name, Slot: spec.Since, Pushed: true}, 0)
	if err != nil {
		return spec, p.q.wrapWrite(op, err)
	}
	if !won {
		return spec, p.addRefused(ctx, ps, name)
	}
	if spec.Paused {
		if err := ps.SetPolicy(ctx, driver.SchedulePaused(name, spec.Since)); err != nil {
			return spec, p.q.wrapWrite(op, err)
		}
	}
	if err := ps.SetPolicy(ctx, spec.Policy()); err != nil {
		return spec, p.q.wrapWrite(op, err)
	}
	// A remove that marked the state after the swap above may have listed
	// the definitions before this one was written: take it back as that
	// remove would have, rather than leave a definition that never fires.
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return spec, p.q.wrap(op, err)
	}
	if st, limit := firedOf(pols, name); limit == 0 || isRemoval(st) {
		if _, err := p.dropSchedule(ctx, ps, name); err != nil {
			return spec, p.q.wrapWrite(op, err)
		}
		return spec, &Error{Code: errcode.FailedPrecondition, Op: op, Queue: p.q.url,
			Msg: fmt.Sprintf("schedule %q was removed while it was being added: add it again", name)}
	}
	return spec, nil
}

// addRefused is AddSchedule's error when the schedule name has a firing
// state already: the schedule exists, is being added or removed, or a
// remove was interrupted.
func (p *Admin) addRefused(ctx context.Context, ps driver.PolicyStore, name string) error {
	const op = "schedule add"
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return p.q.wrap(op, err)
	}
	// A firing state without a definition that a scheduler claimed from
	// (an add's first state has no claim time) is a remove's, interrupted
	// while it waited for that claim.
	if st, _ := firedOf(pols, name); isRemoval(st) || (len(findSchedule(pols, name)) == 0 && st.ClaimedAt.UnixMilli() > 0) {
		return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: p.q.url,
			Msg: fmt.Sprintf("schedule %q is being removed: add it again once `schedule rm %s` is done (run it again if it was interrupted)", name, name)}
	}
	return &Error{Code: errcode.AlreadyExists, Op: op, Queue: p.q.url,
		Msg: fmt.Sprintf("schedule %q already exists in this queue: remove it first (`schedule rm %s`) or pick another name", name, name)}
}

// newScheduleSpec validates a new schedule's parts.
func newScheduleSpec(name, cron string, t *Task, o ScheduleOptions) (driver.ScheduleSpec, error) {
	spec := driver.ScheduleSpec{Name: name, Cron: cron, TimeZone: o.TimeZone, Paused: o.Paused}
	if err := driver.ValidateScheduleName(name); err != nil {
		return spec, err
	}
	missed, err := driver.ParseMissed(string(o.Missed))
	if err != nil {
		return spec, err
	}
	spec.Missed = missed
	if _, err := cronslot.Parse(cron, o.TimeZone); err != nil {
		return spec, driver.Errorf(errcode.InvalidArgument, "%w", err)
	}
	switch {
	case t == nil:
		return spec, driver.Errorf(errcode.InvalidArgument, "schedule %q has no task: give a command or a kind and payload", name)
	case t.ID != "":
		return spec, driver.Errorf(errcode.InvalidArgument, "a scheduled task has no ID of its own (got %q): each slot gets one from the schedule's name and the slot's time", t.ID)
	case !t.NotBefore.IsZero():
		return spec, driver.Errorf(errcode.InvalidArgument, "a scheduled task has no NotBefore: the schedule says when it runs")
	}
	body, err := encodeTask(t)
	if err != nil {
		return spec, driver.Errorf(errcode.InvalidArgument, "schedule %q: %w", name, err)
	}
	spec.Task = body
	if n := len(spec.Policy().Key); n > driver.MaxScheduleSpecLen {
		return spec, driver.Errorf(errcode.InvalidArgument, "schedule %q is %d bytes long encoded; keep it to %d: put a long command in a script and schedule the script", name, n, driver.MaxScheduleSpecLen)
	}
	return spec, nil
}

// Schedules lists the queue's schedules by name, with the last slot fired
// and the next one after now.
func (p *Admin) Schedules(ctx context.Context) ([]driver.ScheduleStatus, error) {
	const op = "schedule list"
	ps, err := p.scheduleStore(op)
	if err != nil {
		return nil, err
	}
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return nil, p.q.wrap(op, err)
	}
	now := time.Now()
	var out []driver.ScheduleStatus
	for _, s := range schedulesOf(pols) {
		st := driver.ScheduleStatus{ScheduleSpec: s.spec}
		if s.fired.Slot.After(s.spec.Since) {
			st.LastFired, st.Pending = s.fired.Slot, !s.fired.Pushed
		}
		if c, err := cronslot.Parse(s.spec.Cron, s.spec.TimeZone); err == nil {
			st.Next = c.Next(now)
		}
		out = append(out, st)
	}
	return out, nil
}

// RemoveSchedule removes the schedule named name and reports whether there
// was one. Tasks it already pushed stay queued. Where the store swaps
// atomically (Schedules Native), no slot is pushed after it returns: a
// slot claimed before is waited for (up to driver.ScheduleClaimGrace)
// until its push is confirmed. The definition goes first, so that no
// scheduler claims another slot while it waits; when ctx ends during that
// wait, the error says that the schedule is removed but the claimed slot
// may still be pushed once (errors.Is finds ctx's error), and calling it
// again finishes the removal.
func (p *Admin) RemoveSchedule(ctx context.Context, name string) (bool, error) {
	const op = "schedule rm"
	ps, err := p.scheduleStore(op)
	if err != nil {
		return false, err
	}
	// No scheduler claims a slot of a schedule it does not list: from here
	// on only a claim made before can still push.
	defs, err := p.dropDefinition(ctx, ps, name)
	if err != nil {
		return false, p.q.wrapWrite(op, err)
	}
	had, err := p.stopFiring(ctx, ps, name)
	if err == nil {
		_, err = ps.UnsetPolicy(ctx, driver.ScheduleFiredPolicy, name)
	}
	var cut *claimWaitCut
	switch {
	case errors.As(err, &cut):
		return true, &Error{Code: errcode.Of(cut.err), Op: op, Queue: p.q.url, Err: cut.err,
			Msg: fmt.Sprintf("schedule %q is removed and claims no more slots, but slot %s, claimed by a scheduler just before, was not yet confirmed pushed when the call's context ended (%v): that one run (task %s) may still be pushed; run `schedule rm %s` again to wait for it and finish the removal",
				name, cut.slot.UTC().Format(time.RFC3339), cut.err, driver.ScheduleTaskID(name, cut.slot), name)}
	case err != nil && defs:
		werr := p.q.wrapWrite(op, err)
		return true, &Error{Code: errcode.Of(werr), Op: op, Queue: p.q.url, Err: werr,
			Msg: fmt.Sprintf("schedule %q is removed and claims no more slots, but finishing the removal failed (%v): run `schedule rm %s` again", name, werr, name)}
	}
	return had || defs, p.q.wrapWrite(op, err)
}

// claimWaitCut is stopFiring's error when ctx ended while it waited for
// the claimed slot to be pushed.
type claimWaitCut struct {
	slot time.Time
	err  error // ctx's
}

func (e *claimWaitCut) Error() string {
	return fmt.Sprintf("waiting for slot %s, claimed by a scheduler, to be pushed: %v", e.slot.UTC().Format(time.RFC3339), e.err)
}

func (e *claimWaitCut) Unwrap() error { return e.err }

// stopFiring replaces the firing state of the schedule name with a removal
// mark, which no scheduler's claim expects: from then on no slot of it is
// claimed. A claim still unconfirmed and younger than
// driver.ScheduleClaimGrace is waited for first, at most that long, so
// that its push is done; a *claimWaitCut is the error when ctx ends first.
// It reports whether there was a state to replace.
func (p *Admin) stopFiring(ctx context.Context, ps driver.PolicyStore, name string) (bool, error) {
	giveUp := time.Now().Add(driver.ScheduleClaimGrace)
	pause := 10 * time.Millisecond
	for {
		pols, err := ps.ListPolicies(ctx)
		if err != nil {
			return false, err
		}
		st, old := firedOf(pols, name)
		had := old != 0
		if isRemoval(st) {
			return false, nil // another remove got here first
		}
		now := time.Now()
		if had && !st.Pushed && now.Before(giveUp) && now.Sub(st.ClaimedAt) < driver.ScheduleClaimGrace {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return false, &claimWaitCut{slot: st.Slot, err: ctx.Err()}
			case <-t.C:
			}
			pause = min(2*pause, 500*time.Millisecond)
			continue
		}
		won, err := swapFired(ctx, ps, removal(name, now), old)
		if err != nil || won {
			return had, err
		}
	}
}

// dropDefinition deletes the definition and pause of the schedule name,
// and reports whether it had a definition.
func (p *Admin) dropDefinition(ctx context.Context, ps driver.PolicyStore, name string) (bool, error) {
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return false, err
	}
	specs := findSchedule(pols, name)
	for _, pol := range specs {
		if _, err := ps.UnsetPolicy(ctx, driver.SchedulePolicy, pol.Key); err != nil {
			return false, err
		}
	}
	_, err = ps.UnsetPolicy(ctx, driver.SchedulePausedPolicy, name)
	return len(specs) > 0, err
}

// dropSchedule deletes the definition, pause and firing state of the
// schedule name, and reports whether it had a definition.
func (p *Admin) dropSchedule(ctx context.Context, ps driver.PolicyStore, name string) (bool, error) {
	defs, err := p.dropDefinition(ctx, ps, name)
	if err != nil {
		return false, err
	}
	_, err = ps.UnsetPolicy(ctx, driver.ScheduleFiredPolicy, name)
	return defs, err
}

// removal is the firing state a remove leaves while it deletes the rest:
// slot 1 ms after the epoch (no cron slot), not pushed, claimed now (so
// that a scheduler of an older version waits rather than take it over).
func removal(name string, now time.Time) driver.FiredState {
	return driver.FiredState{Name: name, Slot: time.UnixMilli(1), ClaimedAt: now}
}

// isRemoval reports whether st is a removal's mark.
func isRemoval(st driver.FiredState) bool { return !st.Pushed && st.Slot.UnixMilli() == 1 }

// firedOf returns the firing state of the schedule name among pols and
// its stored Limit (0: none; a state that does not parse is kept with its
// Limit, so that it can be swapped away).
func firedOf(pols []driver.Policy, name string) (driver.FiredState, int64) {
	for _, pol := range pols {
		if pol.Kind == driver.ScheduleFiredPolicy && pol.Key == name {
			st, _ := driver.ParseFired(pol)
			return st, pol.Limit
		}
	}
	return driver.FiredState{}, 0
}

// PauseSchedule stops the schedule named name firing until ResumeSchedule;
// it fails with NotFound when there is none. Pausing a paused schedule
// changes nothing.
func (p *Admin) PauseSchedule(ctx context.Context, name string) error {
	const op = "schedule pause"
	ps, s, err := p.scheduleNamed(ctx, op, name)
	if err != nil || s.spec.Paused {
		return err
	}
	return p.q.wrapWrite(op, ps.SetPolicy(ctx, driver.SchedulePaused(name, time.Now())))
}

// ResumeSchedule lets a paused schedule fire again from now: slots that
// passed while it was paused are not caught up, whatever its missed-run
// policy. It fails with NotFound when there is no such schedule.
func (p *Admin) ResumeSchedule(ctx context.Context, name string) error {
	const op = "schedule resume"
	ps, s, err := p.scheduleNamed(ctx, op, name)
	if err != nil || !s.spec.Paused {
		return err
	}
	// The firing state first: were the pause lifted before, a scheduler
	// could catch up a slot that passed while paused. A claim left
	// unconfirmed (its scheduler died, and a paused schedule is not taken
	// over) moves too: taken over from the resume on, its slot is pushed
	// and none of the pause caught up after it.
	if st := s.fired; s.hasFired {
		resumed := st
		resumed.ClaimedAt = time.Now()
		if _, err := swapFired(ctx, ps, resumed, st.Policy().Limit); err != nil {
			return p.q.wrapWrite(op, err)
		}
	}
	_, err = ps.UnsetPolicy(ctx, driver.SchedulePausedPolicy, name)
	return p.q.wrapWrite(op, err)
}

// scheduleNamed returns the store and the schedule named name, or a
// NotFound error.
func (p *Admin) scheduleNamed(ctx context.Context, op, name string) (driver.PolicyStore, storedSchedule, error) {
	ps, err := p.scheduleStore(op)
	if err != nil {
		return nil, storedSchedule{}, err
	}
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return nil, storedSchedule{}, p.q.wrap(op, err)
	}
	for _, s := range schedulesOf(pols) {
		if s.spec.Name == name {
			return ps, s, nil
		}
	}
	return nil, storedSchedule{}, &Error{Code: errcode.NotFound, Op: op, Queue: p.q.url,
		Msg: fmt.Sprintf("no schedule %q in this queue (`schedule list` lists them)", name)}
}

// scheduleStore is the policy store, once the backend is known to keep
// schedules.
func (p *Admin) scheduleStore(op string) (driver.PolicyStore, error) {
	ps, err := p.policyStore(op)
	if err != nil {
		return nil, err
	}
	if err := p.q.degrade(op, driver.Schedules); err != nil {
		return nil, err
	}
	return ps, nil
}

// findSchedule returns the definition of the schedule named name (one,
// unless something else wrote the store).
func findSchedule(pols []driver.Policy, name string) []driver.Policy {
	var out []driver.Policy
	for _, pol := range pols {
		if pol.Kind != driver.SchedulePolicy {
			continue
		}
		if s, err := driver.ParseScheduleSpec(pol); err == nil && s.Name == name {
			out = append(out, pol)
		}
	}
	return out
}

// storedSchedule is one schedule's definition and firing state as stored.
type storedSchedule struct {
	spec     driver.ScheduleSpec
	fired    driver.FiredState
	hasFired bool
}

// schedulesOf gathers the schedules among pols, sorted by name, with
// their firing state and pause.
func schedulesOf(pols []driver.Policy) []storedSchedule {
	var out []storedSchedule
	at := map[string]int{}
	for _, pol := range pols {
		if pol.Kind != driver.SchedulePolicy {
			continue
		}
		s, err := driver.ParseScheduleSpec(pol)
		if _, dup := at[s.Name]; err != nil || dup {
			continue
		}
		at[s.Name] = len(out)
		out = append(out, storedSchedule{spec: s})
	}
	for _, pol := range pols {
		i, ok := at[pol.Key]
		switch {
		case !ok:
		case pol.Kind == driver.SchedulePausedPolicy:
			out[i].spec.Paused = true
		case pol.Kind == driver.ScheduleFiredPolicy:
			if f, err := driver.ParseFired(pol); err == nil {
				out[i].fired, out[i].hasFired = f, true
			}
		}
	}
	slices.SortFunc(out, func(a, b storedSchedule) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	return out
}

// swapFired stores f in place of the firing state whose Limit is old (0:
// none), atomically where the store is a PolicySwapper; otherwise with a
// read then a write, which two schedulers may both pass (the Emulated
// level of Schedules).
func swapFired(ctx context.Context, ps driver.PolicyStore, f driver.FiredState, old int64) (bool, error) {
	if sw, ok := ps.(driver.PolicySwapper); ok {
		return sw.SwapPolicy(ctx, f.Policy(), old)
	}
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return false, err
	}
	var cur int64
	for _, pol := range pols {
		if pol.Kind == driver.ScheduleFiredPolicy && pol.Key == f.Name {
			cur = pol.Limit
		}
	}
	if cur != old {
		return false, nil
	}
	return true, ps.SetPolicy(ctx, f.Policy())
}

// isScheduleKind reports whether k is one of the policy kinds that hold
// schedules, which only the schedule methods write.
func isScheduleKind(k driver.PolicyKind) bool { return driver.IsScheduleKind(k) }
