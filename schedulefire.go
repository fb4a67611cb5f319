package jobq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/cronslot"
)

// FireSchedules pushes the task of every slot that is due at now, for
// every schedule of the queue that is not paused, and returns what it
// pushed. Workers call it every driver.ScheduleRefresh (and `jobq QUEUE
// scheduler` does); call it yourself only to fire schedules from a
// process of your own. now is normally time.Now(); a slot is decided from
// it alone, so any number of callers may race: each slot is claimed by one
// (an atomic swap of the schedule's firing state), which then pushes the
// slot's task and confirms the push. A claim left unconfirmed for
// driver.ScheduleClaimGrace (its caller died) is taken over: the task is
// pushed again with the same ID, which the queue's dedup (and, where
// results are kept, a unique-for check) turns into a duplicate if it was
// pushed after all. Errors of single schedules are joined; the others
// still fire.
func (p *Admin) FireSchedules(ctx context.Context, now time.Time) ([]driver.ScheduleRun, error) {
	runs, _, err := p.fireSchedules(ctx, now, nil)
	return runs, err
}

// scheduleFault, when set, is called at each stage of a firing
// ("decided": the slot is due and not claimed yet; "claimed": claimed and
// its task not pushed; "pushed": pushed and not confirmed); an error stops that schedule's firing there, as a crash
// would. The conformance suite sets it through package hooks.
type scheduleFault func(stage, name string, slot time.Time) error

// fireSchedules is FireSchedules with a fault hook; it also returns the
// earliest slot after now of the schedules it looked at (zero when there
// are none), which a worker's background loop waits for.
func (p *Admin) fireSchedules(ctx context.Context, now time.Time, fault scheduleFault) ([]driver.ScheduleRun, time.Time, error) {
	const op = "schedule fire"
	var next time.Time
	ps, err := p.scheduleStore(op)
	if err != nil {
		return nil, next, err
	}
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return nil, next, p.q.wrap(op, err)
	}
	var runs []driver.ScheduleRun
	var errs []error
	for _, s := range schedulesOf(pols) {
		if s.spec.Paused || !s.hasFired || isRemoval(s.fired) {
			continue
		}
		if c, err := cronslot.Parse(s.spec.Cron, s.spec.TimeZone); err == nil {
			if n := c.Next(now); next.IsZero() || n.Before(next) {
				next = n
			}
		}
		f := firing{a: p, ps: ps, s: s, now: now, fault: fault}
		got, err := f.fire(ctx)
		runs = append(runs, got...)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", s.spec.Name, err))
		}
	}
	return runs, next, p.q.wrap(op, errors.Join(errs...))
}

// firing is one schedule's turn in FireSchedules.
type firing struct {
	a     *Admin
	ps    driver.PolicyStore
	s     storedSchedule
	now   time.Time
	fault scheduleFault
}

// fire takes over a stale claim, then claims and pushes the due slot.
func (f *firing) fire(ctx context.Context) ([]driver.ScheduleRun, error) {
	c, err := cronslot.Parse(f.s.spec.Cron, f.s.spec.TimeZone)
	if err != nil {
		return nil, err
	}
	var runs []driver.ScheduleRun
	st := f.s.fired
	if !st.Pushed {
		if f.now.Sub(st.ClaimedAt) < driver.ScheduleClaimGrace {
			return nil, nil // its claimer is pushing it
		}
		run, next, err := f.push(ctx, st, true)
		if err != nil {
			return nil, err
		}
		runs, st = append(runs, run), next
	}
	// No slot at or before the last one claimed, the schedule's creation
	// or (once pushed) the claim or resume time fires: the claimed slot was
	// the latest due when it was claimed.
	last := st.Slot
	for _, t := range []time.Time{f.s.spec.Since, st.ClaimedAt} {
		if t.After(last) && (st.Pushed || t.Equal(f.s.spec.Since)) {
			last = t
		}
	}
	slot, ok := c.Due(last, f.now, f.s.spec.Missed)
	if !ok {
		return runs, nil
	}
	if err := f.stage("decided", slot); err != nil {
		return runs, err
	}
	claim := driver.FiredState{Name: st.Name, Slot: slot, ClaimedAt: f.now}
	won, err := swapFired(ctx, f.ps, claim, st.Policy().Limit)
	if err != nil || !won {
		return runs, err
	}
	if err := f.stage("claimed", slot); err != nil {
		return runs, err
	}
	run, _, err := f.push(ctx, claim, false)
	if err != nil {
		return runs, err
	}
	return append(runs, run), nil
}

// push pushes the task of the claimed slot st and confirms it. A take-over
// push asks for uniqueness over the slot's age where the queue keeps
// results, so that a task that already ran is not run again.
func (f *firing) push(ctx context.Context, st driver.FiredState, takeOver bool) (driver.ScheduleRun, driver.FiredState, error) {
	run := driver.ScheduleRun{Name: st.Name, Slot: st.Slot, TaskID: driver.ScheduleTaskID(st.Name, st.Slot), TakeOver: takeOver}
	t, err := unmarshalTask(f.s.spec.Task)
	if err != nil {
		return run, st, driver.Errorf(errcode.InvalidArgument, "its stored task does not decode: %w", err)
	}
	t.ID = run.TaskID
	var opts PushOptions
	if f.uniqueFor(ctx, takeOver) {
		opts.UniqueFor = max(f.now.Sub(st.Slot), 0) + driver.ScheduleClaimGrace + time.Hour
	}
	res, err := f.a.q.PushBatch(ctx, []*Task{t}, opts)
	if err != nil {
		return run, st, err
	}
	run.Duplicate = res[0].Duplicate
	if err := f.stage("pushed", st.Slot); err != nil {
		return run, st, err
	}
	done := st
	done.Pushed = true
	if _, err := swapFired(ctx, f.ps, done, st.Policy().Limit); err != nil {
		return run, st, err
	}
	return run, done, nil
}

// uniqueFor reports whether a push should check the result records: on a
// take-over, or always where claims are not atomic, when the queue keeps
// records.
func (f *firing) uniqueFor(ctx context.Context, takeOver bool) bool {
	q := f.a.q
	if _, atomic := f.ps.(driver.PolicySwapper); atomic && !takeOver {
		return false
	}
	return q.results != nil && q.caps.Level(driver.Results) != driver.Unsupported && q.policies.results(ctx) != driver.ResultsNone
}

func (f *firing) stage(stage string, slot time.Time) error {
	if f.fault == nil {
		return nil
	}
	return f.fault(stage, f.s.spec.Name, slot)
}
