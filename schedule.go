package jobq

import (
	"context"
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
// ID and no NotBefore. A name the queue already has fails with
// AlreadyExists.
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
	fresh := driver.FiredState{Name: name, Slot: time.UnixMilli(0), Pushed: true}
	won, err := swapFired(ctx, ps, fresh, 0)
	if err != nil {
		return spec, p.q.wrapWrite(op, err)
	}
	if !won {
		pols, err := ps.ListPolicies(ctx)
		if err != nil {
			return spec, p.q.wrap(op, err)
		}
		if len(findSchedule(pols, name)) > 0 {
			return spec, &Error{Code: errcode.AlreadyExists, Op: op, Queue: p.q.url,
				Msg: fmt.Sprintf("schedule %q already exists in this queue: remove it first (`schedule rm %s`) or pick another name", name, name)}
		}
		// A firing state without a definition is what an interrupted
		// remove leaves: start it afresh.
		if err := ps.SetPolicy(ctx, fresh.Policy()); err != nil {
			return spec, p.q.wrapWrite(op, err)
		}
		if _, err := ps.UnsetPolicy(ctx, driver.SchedulePausedPolicy, name); err != nil {
			return spec, p.q.wrapWrite(op, err)
		}
	}
	if spec.Paused {
		if err := ps.SetPolicy(ctx, driver.SchedulePaused(name, spec.Since)); err != nil {
			return spec, p.q.wrapWrite(op, err)
		}
	}
	return spec, p.q.wrapWrite(op, ps.SetPolicy(ctx, spec.Policy()))
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
		if s.fired.Slot.UnixMilli() > 0 {
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
// was one. Tasks it already pushed stay queued.
func (p *Admin) RemoveSchedule(ctx context.Context, name string) (bool, error) {
	const op = "schedule rm"
	ps, err := p.scheduleStore(op)
	if err != nil {
		return false, err
	}
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return false, p.q.wrap(op, err)
	}
	specs := findSchedule(pols, name)
	for _, pol := range specs {
		if _, err := ps.UnsetPolicy(ctx, driver.SchedulePolicy, pol.Key); err != nil {
			return false, p.q.wrapWrite(op, err)
		}
	}
	if _, err := ps.UnsetPolicy(ctx, driver.SchedulePausedPolicy, name); err != nil {
		return false, p.q.wrapWrite(op, err)
	}
	had, err := ps.UnsetPolicy(ctx, driver.ScheduleFiredPolicy, name)
	return had || len(specs) > 0, p.q.wrapWrite(op, err)
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
