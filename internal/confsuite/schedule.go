package confsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// errKilled is what the fault hook returns to stop a scheduler mid-fire.
var errKilled = errors.New("scheduler killed mid-fire (conformance fault)")

// schedRig is one schedule under test: the queue, two more handles
// acting as two schedulers, and the runs counted per task ID.
type schedRig struct {
	c      *C
	q      *handle
	a, b   *handle
	name   string
	since  time.Time
	counts map[string]int
	// maxRace is how often a slot may run when two schedulers race:
	// once, but twice where the claim is not atomic and the queue has no
	// dedup (declared Emulated).
	maxRace int
}

// checkSchedules: a schedule's slots, decided from a fake "now" with the
// real engine, are each pushed once when two schedulers fire at the same
// moment (and again after the slot's task ran), when a scheduler dies
// between claiming a slot and pushing it, and when it dies between the
// push and its confirmation (after the task ran). Bad input is refused with
// InvalidArgument, a second schedule of one name with AlreadyExists; a
// paused schedule fires nothing; list, pause and rm do what they say.
// Native: a scheduler that decided a slot before the schedule was removed
// and added again pushes nothing; rm waits for a slot claimed before it to
// be pushed; of two adds of one name at once, one succeeds.
// Unsupported: AddSchedule fails with Unimplemented. Emulated: the same,
// except that racing schedulers may both push a slot on a queue without
// dedup.
func checkSchedules(c *C) {
	q := c.open()
	if level(q, driver.Schedules) == driver.Unsupported {
		_, err := q.Admin().AddSchedule(c.ctx(), "nightly", "0 3 * * *", task("scheduled"), jobq.ScheduleOptions{})
		c.expectCode(err, errcode.Unimplemented, "AddSchedule on a backend without schedules")
		c.skipNeeds("feature schedules", "schedules are unsupported: "+q.Capabilities().Features[driver.Schedules].Fallback)
	}
	r := &schedRig{c: c, q: q, a: c.openQueue(q.ref), b: c.openQueue(q.ref), name: "every-minute", counts: map[string]int{}, maxRace: 1}
	if level(q, driver.Schedules) == driver.Emulated && level(q, driver.Dedup) == driver.Unsupported {
		r.maxRace = 2
	}
	r.badInput()
	spec, err := q.Admin().AddSchedule(c.ctx(), r.name, "* * * * *", task("scheduled"), jobq.ScheduleOptions{})
	if err != nil {
		c.Fatalf("AddSchedule: %v", err)
	}
	r.since = spec.Since
	_, err = r.b.Admin().AddSchedule(c.ctx(), r.name, "0 * * * *", task("scheduled again"), jobq.ScheduleOptions{})
	c.expectCode(err, errcode.AlreadyExists, "AddSchedule of a name the queue has")

	for k := 1; k <= 2; k++ {
		r.race(k)
	}
	r.slowLoser(3)
	r.killedAfterClaim(4)
	r.killedAfterPush(5)
	r.paused(6)
	r.listAndRemove()
	if level(q, driver.Schedules) == driver.Native {
		r.readdedWhileFiring(8)
		r.removedWhileClaimed(9)
		r.addedTwiceAtOnce()
	}
}

// slot returns the k-th minute slot after the schedule was added, and a
// "now" a few seconds after it.
func (r *schedRig) slot(k int) (slot, now time.Time) {
	slot = r.since.Truncate(time.Minute).Add(time.Duration(k) * time.Minute)
	return slot, slot.Add(5 * time.Second)
}

// badInput: what AddSchedule refuses.
func (r *schedRig) badInput() {
	c := r.c
	for _, tt := range []struct {
		name, cron string
		o          jobq.ScheduleOptions
		what       string
	}{
		{"bad-cron", "61 * * * *", jobq.ScheduleOptions{}, "a minute of 61"},
		{"bad-tz", "* * * * *", jobq.ScheduleOptions{TimeZone: "Mars/Olympus"}, "an unknown time zone"},
		{"bad-missed", "* * * * *", jobq.ScheduleOptions{Missed: "twice"}, "an unknown missed-run policy"},
		{"bad name", "* * * * *", jobq.ScheduleOptions{}, "a name with a space"},
	} {
		_, err := r.q.Admin().AddSchedule(c.ctx(), tt.name, tt.cron, task("bad"), tt.o)
		c.expectCode(err, errcode.InvalidArgument, "AddSchedule with "+tt.what)
	}
}

// fire runs one scheduler's pass at now, with an optional fault.
func (r *schedRig) fire(h *handle, now time.Time, fault func(stage, name string, slot time.Time) error) ([]driver.ScheduleRun, error) {
	runs, _, err := hooks.FireSchedules(r.c.ctx(), h.Queue, now, fault)
	return runs, err
}

// race: the two schedulers fire slot k at the same moment; the slot's task
// is pushed once; once it ran, both fire again and push nothing.
func (r *schedRig) race(k int) {
	c := r.c
	slot, now := r.slot(k)
	var wg sync.WaitGroup
	for _, h := range []*handle{r.a, r.b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.fire(h, now, nil); err != nil {
				c.Errorf("FireSchedules at slot %d: %v", k, err)
			}
		}()
	}
	wg.Wait()
	r.drain()
	r.expectRuns(slot, 1, r.maxRace, fmt.Sprintf("slot %d, two schedulers racing", k))
	for _, h := range []*handle{r.a, r.b} {
		if runs, err := r.fire(h, now.Add(time.Second), nil); err != nil || len(runs) != 0 {
			c.Errorf("FireSchedules again after slot %d ran = %+v, %v; want nothing pushed", k, runs, err)
		}
	}
	r.drain()
	r.expectRuns(slot, 1, r.maxRace, fmt.Sprintf("slot %d, fired again after its task ran", k))
}

// slowLoser: scheduler a decides that slot k is due and stalls before it
// claims it; meanwhile b fires the slot and its task runs. a then goes on
// and must push nothing: the queue's dedup cannot help here (the task is
// gone), only the claim.
func (r *schedRig) slowLoser(k int) {
	c := r.c
	slot, now := r.slot(k)
	runs, err := r.fire(r.a, now, func(stage, _ string, _ time.Time) error {
		if stage != "decided" {
			return nil
		}
		if got, err := r.fire(r.b, now, nil); err != nil || len(got) != 1 {
			c.Errorf("FireSchedules of slot %d while another scheduler stalls = %+v, %v; want it pushed", k, got, err)
		}
		r.drain()
		return nil
	})
	if err != nil || len(runs) != 0 {
		c.Errorf("FireSchedules of a scheduler that stalled while slot %d ran = %+v, %v; want nothing pushed", k, runs, err)
	}
	r.drain()
	r.expectRuns(slot, 1, 1, fmt.Sprintf("slot %d, fired by a scheduler that stalled while another fired it", k))
}

// killedAfterClaim: scheduler a dies between claiming slot k and pushing
// its task. b pushes nothing while the claim is fresh, and takes it over
// after driver.ScheduleClaimGrace: the slot runs once.
func (r *schedRig) killedAfterClaim(k int) {
	c := r.c
	slot, now := r.slot(k)
	_, err := r.fire(r.a, now, func(stage, _ string, _ time.Time) error {
		if stage == "claimed" {
			return errKilled
		}
		return nil
	})
	if !errors.Is(err, errKilled) {
		c.Errorf("FireSchedules with a fault after the claim = %v; want the fault", err)
	}
	if runs, err := r.fire(r.b, now.Add(time.Second), nil); err != nil || len(runs) != 0 {
		c.Errorf("FireSchedules while another scheduler's claim is fresh = %+v, %v; want nothing pushed", runs, err)
	}
	r.drain()
	r.expectRuns(slot, 0, 0, fmt.Sprintf("slot %d, claimed by a scheduler that died before pushing", k))
	runs, err := r.fire(r.b, now.Add(driver.ScheduleClaimGrace+time.Second), nil)
	if err != nil || len(runs) != 1 || !runs[0].TakeOver {
		c.Errorf("FireSchedules after the claim grace = %+v, %v; want one take-over", runs, err)
	}
	r.drain()
	r.expectRuns(slot, 1, 1, fmt.Sprintf("slot %d, taken over after its scheduler died before pushing", k))
}

// killedAfterPush: scheduler a dies between pushing slot k's task and
// confirming the push; the task runs; b takes the slot over after the
// grace, and the task does not run again.
func (r *schedRig) killedAfterPush(k int) {
	c := r.c
	slot, now := r.slot(k)
	_, err := r.fire(r.a, now, func(stage, _ string, _ time.Time) error {
		if stage == "pushed" {
			return errKilled
		}
		return nil
	})
	if !errors.Is(err, errKilled) {
		c.Errorf("FireSchedules with a fault after the push = %v; want the fault", err)
	}
	r.drain()
	r.expectRuns(slot, 1, 1, fmt.Sprintf("slot %d, pushed by a scheduler that died before confirming", k))
	if _, err := r.fire(r.b, now.Add(driver.ScheduleClaimGrace+time.Second), nil); err != nil {
		c.Errorf("FireSchedules after the claim grace: %v", err)
	}
	r.drain()
	max := 1
	if level(r.q, driver.Results) == driver.Unsupported && level(r.q, driver.Dedup) != driver.Emulated {
		max = 2 // nothing remembers that the task ran: declared in docs/operations.md
	}
	r.expectRuns(slot, 1, max, fmt.Sprintf("slot %d, taken over after its task ran", k))
}

// paused: a paused schedule fires nothing at a due slot; resumed, it fires
// the next slot, not the one that passed while it was paused.
func (r *schedRig) paused(k int) {
	c := r.c
	if err := r.q.Admin().PauseSchedule(c.ctx(), r.name); err != nil {
		c.Fatalf("PauseSchedule: %v", err)
	}
	slot, now := r.slot(k)
	if runs, err := r.fire(r.a, now, nil); err != nil || len(runs) != 0 {
		c.Errorf("FireSchedules of a paused schedule = %+v, %v; want nothing pushed", runs, err)
	}
	r.drain()
	r.expectRuns(slot, 0, 0, fmt.Sprintf("slot %d, schedule paused", k))
	err := r.q.Admin().PauseSchedule(c.ctx(), "no-such-schedule")
	c.expectCode(err, errcode.NotFound, "PauseSchedule of a name the queue does not have")
}

// listAndRemove: the listing shows the schedule paused with its last
// fired slot; RemoveSchedule removes it, and a second one reports none.
func (r *schedRig) listAndRemove() {
	c := r.c
	list, err := r.q.Admin().Schedules(c.ctx())
	if err != nil {
		c.Fatalf("Schedules: %v", err)
	}
	last, _ := r.slot(5)
	if level(r.q, driver.Schedules) == driver.Native {
		if len(list) != 1 || list[0].Name != r.name || !list[0].Paused || !list[0].LastFired.Equal(last) || list[0].Pending || list[0].Next.IsZero() {
			c.Errorf("Schedules = %+v; want %s, paused, last fired %v, not pending, with a next run", list, r.name, last)
		}
	}
	had, err := r.q.Admin().RemoveSchedule(c.ctx(), r.name)
	if err != nil || !had {
		c.Errorf("RemoveSchedule = %v, %v; want true, nil", had, err)
	}
	if had, err := r.q.Admin().RemoveSchedule(c.ctx(), r.name); err != nil || had {
		c.Errorf("a second RemoveSchedule = %v, %v; want false, nil", had, err)
	}
	_, now := r.slot(7)
	if runs, err := r.fire(r.b, now, nil); err != nil || len(runs) != 0 {
		c.Errorf("FireSchedules after RemoveSchedule = %+v, %v; want nothing pushed", runs, err)
	}
}

// readd adds the schedule again with the cron expression cron; its slots
// count from then on (slot k is then slot k of the first definition or the
// one after: pass a k no earlier check used).
func (r *schedRig) readd(cron string) {
	spec, err := r.q.Admin().AddSchedule(r.c.ctx(), r.name, cron, task("scheduled"), jobq.ScheduleOptions{})
	if err != nil {
		r.c.Fatalf("AddSchedule of %s again: %v", r.name, err)
	}
	r.since = spec.Since
}

// readdedWhileFiring: scheduler a decides slot k of a new schedule
// is due; before it claims the slot, the schedule is removed and added
// again with another cron expression. a must push nothing: the slot is
// the old definition's.
func (r *schedRig) readdedWhileFiring(k int) {
	c := r.c
	r.readd("* * * * *")
	slot, now := r.slot(k)
	old := r.since
	runs, err := r.fire(r.a, now, func(stage, _ string, _ time.Time) error {
		if stage != "decided" {
			return nil
		}
		if _, err := r.q.Admin().RemoveSchedule(c.ctx(), r.name); err != nil {
			c.Errorf("RemoveSchedule while a scheduler fires: %v", err)
		}
		for !time.Now().Truncate(time.Millisecond).After(old) {
			// the new definition must be added in a later millisecond
		}
		if _, err := r.q.Admin().AddSchedule(c.ctx(), r.name, "0 0 1 1 *", task("scheduled"), jobq.ScheduleOptions{}); err != nil {
			c.Errorf("AddSchedule again while a scheduler fires: %v", err)
		}
		return nil
	})
	if err != nil || len(runs) != 0 {
		c.Errorf("FireSchedules of a schedule removed and added again with another cron expression after the slot was decided = %+v, %v; want nothing pushed", runs, err)
	}
	r.drain()
	r.expectRuns(slot, 0, 0, "first slot of a schedule replaced while a scheduler fired it")
	if had, err := r.q.Admin().RemoveSchedule(c.ctx(), r.name); err != nil || !had {
		c.Errorf("RemoveSchedule of the replacement = %v, %v; want true, nil", had, err)
	}
}

// removedWhileClaimed: scheduler a has claimed slot k and not pushed it
// yet. A RemoveSchedule whose context ends while it waits for that push
// removes the definition all the same (the schedule is no longer listed,
// and b, firing after the claim grace, neither takes a's claim over nor
// claims a slot), and says so: its error carries the context's, and adding
// the name again is refused as a remove under way. A second RemoveSchedule
// finishes it once a has pushed; the slot ran once. Then, with slot k+2
// claimed, a RemoveSchedule with time enough waits for the push and
// returns after it.
func (r *schedRig) removedWhileClaimed(k int) {
	c := r.c
	r.readd("* * * * *")
	slot, now := r.slot(k)
	runs, err := r.fire(r.a, now, func(stage, _ string, _ time.Time) error {
		if stage != "claimed" {
			return nil
		}
		ctx, cancel := context.WithTimeout(c.ctx(), time.Second)
		defer cancel()
		_, err := r.q.Admin().RemoveSchedule(ctx, r.name)
		c.expectCode(err, errcode.DeadlineExceeded, "RemoveSchedule while a claimed slot is not pushed yet, given 1s")
		if !errors.Is(err, context.DeadlineExceeded) {
			c.Errorf("RemoveSchedule cut short by its context = %v; want errors.Is context.DeadlineExceeded", err)
		}
		if list, err := r.q.Admin().Schedules(c.ctx()); err != nil || len(list) != 0 {
			c.Errorf("Schedules after a RemoveSchedule cut short while it waited = %+v, %v; want the schedule removed", list, err)
		}
		_, later := r.slot(k + 1)
		if runs, err := r.fire(r.b, later.Add(driver.ScheduleClaimGrace), nil); err != nil || len(runs) != 0 {
			c.Errorf("FireSchedules after a RemoveSchedule cut short while it waited = %+v, %v; want nothing pushed", runs, err)
		}
		_, err = r.b.Admin().AddSchedule(c.ctx(), r.name, "* * * * *", task("scheduled"), jobq.ScheduleOptions{})
		c.expectCode(err, errcode.FailedPrecondition, "AddSchedule of a name whose RemoveSchedule was cut short")
		return nil
	})
	if err != nil || len(runs) != 1 {
		c.Errorf("FireSchedules whose claim a RemoveSchedule waited for = %+v, %v; want the slot pushed", runs, err)
	}
	if had, err := r.q.Admin().RemoveSchedule(c.ctx(), r.name); err != nil || !had {
		c.Errorf("RemoveSchedule again after the push = %v, %v; want true, nil", had, err)
	}
	r.drain()
	r.expectRuns(slot, 1, 1, "slot claimed before a RemoveSchedule")
	r.removeWaits(k + 2)
}

// removeWaits: scheduler a has claimed slot k; a RemoveSchedule started
// then (seen under way when the schedule is no longer listed) returns
// only once a has pushed the slot, which runs once; nothing fires after.
func (r *schedRig) removeWaits(k int) {
	c := r.c
	r.readd("* * * * *")
	slot, now := r.slot(k)
	removed := make(chan error, 1)
	runs, err := r.fire(r.a, now, func(stage, _ string, _ time.Time) error {
		if stage != "claimed" {
			return nil
		}
		go func() {
			had, err := r.q.Admin().RemoveSchedule(c.ctx(), r.name)
			if err == nil && !had {
				err = errors.New("it reported no schedule")
			}
			removed <- err
		}()
		if !c.poll(func() bool { list, err := r.q.Admin().Schedules(c.ctx()); return err == nil && len(list) == 0 }) {
			c.Errorf("the schedule is still listed while a RemoveSchedule waits for a claimed slot")
		}
		select {
		case err := <-removed:
			c.Errorf("RemoveSchedule returned (%v) before the claimed slot was pushed", err)
		default:
		}
		return nil
	})
	if err != nil || len(runs) != 1 {
		c.Errorf("FireSchedules whose claim a RemoveSchedule waited for = %+v, %v; want the slot pushed", runs, err)
	}
	if err := <-removed; err != nil {
		c.Errorf("RemoveSchedule that waited for a claimed slot: %v", err)
	}
	r.drain()
	r.expectRuns(slot, 1, 1, "slot claimed before a RemoveSchedule that waited")
	_, later := r.slot(k + 1)
	if runs, err := r.fire(r.b, later, nil); err != nil || len(runs) != 0 {
		c.Errorf("FireSchedules after RemoveSchedule = %+v, %v; want nothing pushed", runs, err)
	}
}

// addedTwiceAtOnce: two handles add a schedule of one name at the same
// moment, with different cron expressions, a number of times: each time
// one add succeeds and the other fails with AlreadyExists, and the queue
// keeps the one definition that succeeded.
func (r *schedRig) addedTwiceAtOnce() {
	c := r.c
	crons := []string{"0 1 * * *", "0 2 * * *"}
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, h := range []*handle{r.a, r.b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = h.Admin().AddSchedule(c.ctx(), r.name, crons[i], task("scheduled"), jobq.ScheduleOptions{})
			}()
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won < 0:
				won = i
			case err == nil:
				c.Fatalf("round %d: both AddSchedule calls of one name at once succeeded; want one AlreadyExists", round)
			default:
				c.expectCode(err, errcode.AlreadyExists, "AddSchedule of a name another handle adds at the same moment")
			}
		}
		if won < 0 {
			c.Fatalf("round %d: neither AddSchedule of one name at once succeeded: %v", round, errs)
		}
		list, err := r.q.Admin().Schedules(c.ctx())
		if err != nil || len(list) != 1 || list[0].Cron != crons[won] {
			c.Fatalf("round %d: Schedules after two adds at once = %+v, %v; want the one that succeeded (%s)", round, list, err, crons[won])
		}
		if had, err := r.q.Admin().RemoveSchedule(c.ctx(), r.name); err != nil || !had {
			c.Fatalf("round %d: RemoveSchedule = %v, %v; want true, nil", round, had, err)
		}
		if had, err := r.q.Admin().RemoveSchedule(c.ctx(), r.name); err != nil || had {
			c.Fatalf("round %d: a second RemoveSchedule = %v, %v; want false, nil (one definition)", round, had, err)
		}
	}
}

// drain receives and completes every task in the queue, counting them by
// ID; a task that is not the schedule's fails the check.
func (r *schedRig) drain() {
	c := r.c
	wait := 200 * time.Millisecond // a Native backend shows a push at once
	if level(r.q, driver.Schedules) != driver.Native {
		wait = 2 * time.Second
	}
	for {
		// A lease that outlasts the check: it tests the schedule, not
		// leases, and a loaded machine once took longer than the
		// short one between the receive and the completion.
		e, err := r.q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.longVis(r.q), Wait: wait})
		if errors.Is(err, jobq.ErrEmpty) {
			return
		}
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		if e.Task.Command != task("scheduled").Command {
			c.Errorf("received task %s %q; want only the schedule's task %q", e.Task.ID, e.Task.Command, task("scheduled").Command)
		}
		r.counts[e.Task.ID]++
		if err := e.Complete(c.ctx()); err != nil {
			c.Fatalf("complete %s: %v", e.Task.ID, err)
		}
	}
}

// expectRuns checks how often slot's task ran so far.
func (r *schedRig) expectRuns(slot time.Time, min, max int, when string) {
	r.c.Helper()
	id := driver.ScheduleTaskID(r.name, slot)
	if n := r.counts[id]; n < min || n > max {
		want := fmt.Sprintf("%d to %d times", min, max)
		if min == max {
			want = fmt.Sprintf("%d times", min)
		}
		r.c.Errorf("%s: the slot's task %s ran %d times; want %s", when, id, n, want)
	}
}
