package jobq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
)

// sweepPage is how many held tasks one read of a sweep lists.
const sweepPage = 500

// SweepResult says what one SweepHeld did.
type SweepResult struct {
	// Released are the IDs of the held tasks it queued: their parents
	// ended as they required.
	Released []string
	// Cancelled are the IDs of the held tasks it cancelled (a cancelled
	// record names the parent or group that failed).
	Cancelled []string
}

// SweepHeld decides the queue's held tasks (Task.After, Task.AfterGroups,
// Admin.ThenGroup): it reads their parents' result records and groups'
// counts, queues those whose parents all ended as required, and cancels
// those with a parent that was dead-lettered or cancelled (recording why
// first). Where records are emulated, it also looks, at most every 10 s,
// for the parents and group members still waited for in the dead letters
// (a task dead-lettered without a record), as Queue.WaitFunc does. Workers call it every driver.ScheduleRefresh, with the queue's
// schedules (unless worker.Options.NoSchedules), and `jobq QUEUE
// scheduler` does; call it yourself only from a process of your own. Any
// number of callers may race: the backend releases or drops each held
// task once. A queue with no held task costs one short read. It fails
// with Unimplemented where the backend cannot hold tasks.
func (a *Admin) SweepHeld(ctx context.Context) (SweepResult, error) {
	res, _, err := a.sweepHeld(ctx)
	return res, err
}

// sweepHeld is SweepHeld; it also returns how many held tasks it read, so
// that a worker's background loop can sweep a queue without any less often.
func (a *Admin) sweepHeld(ctx context.Context) (res SweepResult, held int, err error) {
	const op = "sweep"
	q := a.q
	if err := q.checkOpen(op); err != nil {
		return res, 0, err
	}
	hs, ok := q.drv.(driver.HeldStore)
	if !ok || q.caps.Level(driver.Dependencies) == driver.Unsupported || q.results == nil {
		return res, 0, q.unsupported(op, driver.Dependencies, "cannot hold a task until others end (dependencies and group steps)")
	}
	w := q.sweepWaiting()
	if w != nil {
		defer q.deadSweep.mu.Unlock()
	}
	held, err = q.sweepAll(ctx, hs, &res, w)
	if err != nil || !q.sweepDead(ctx, w) {
		return res, held, err
	}
	// Parents found in the dead letters have a record now: decide again.
	held, err = q.sweepAll(ctx, hs, &res, nil)
	return res, held, err
}

// sweepAll decides every held task, a page at a time, and adds to w, when
// not nil, what those it leaves held wait for.
func (q *Queue) sweepAll(ctx context.Context, hs driver.HeldStore, res *SweepResult, w *waiting) (held int, err error) {
	cursor := ""
	for {
		page, next, err := hs.ListHeld(ctx, cursor, sweepPage)
		if err != nil {
			return held, q.wrap("sweep", err)
		}
		held += len(page)
		if len(page) > 0 {
			if err := q.sweepPage(ctx, hs, page, res, w); err != nil {
				return held, err
			}
		}
		if next == "" {
			return held, nil
		}
		cursor = next
	}
}

// sweepPage decides one page of held tasks: one batched read of the
// parents' records (and of the held tasks' own, where an interrupted
// cancel left one), one read per group named, then one Release and one
// Drop.
func (q *Queue) sweepPage(ctx context.Context, hs driver.HeldStore, page []*driver.HeldMessage, res *SweepResult, w *waiting) error {
	const op = "sweep"
	var ids []string
	seen := map[string]bool{}
	for _, h := range page {
		for _, id := range append([]string{h.Message.ID}, h.After...) {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	recs, err := q.getResults(ctx, op, q.results, ids)
	if err != nil {
		return err
	}
	rec := make(map[string]*driver.ResultRecord, len(ids))
	for i, r := range recs {
		if r != nil {
			rec[ids[i]] = r
		}
	}
	again, err := q.parentsPushedAgain(ctx, op, page, rec)
	if err != nil {
		return err
	}
	groups := map[string]*driver.GroupCounters{}
	var release []string
	var cancel []*driver.ResultRecord
	var drop []string
	now := time.Now()
	for _, h := range page {
		if own := rec[h.Message.ID]; own != nil && own.State == driver.ResultCancelled {
			// A cancel recorded it, and was cut short before its drop (an
			// earlier task's cancelled record with this ID was deleted
			// when this one was held: clearStaleCancels).
			drop = append(drop, h.Message.ID)
			continue
		}
		v, err := q.verdict(ctx, h, rec, again, groups)
		if err != nil {
			return err
		}
		switch {
		case v.release:
			release = append(release, h.Message.ID)
		case v.reason != "":
			cancel = append(cancel, q.newRecord(ctx, h.Message.ID, driver.ResultCancelled, now, &recordDetails{errText: v.reason, group: h.Message.Group}))
			drop = append(drop, h.Message.ID)
		default:
			w.add(h, rec, groups)
		}
	}
	if len(release) > 0 {
		got, err := hs.Release(ctx, release)
		if err != nil {
			return q.wrap(op, err)
		}
		res.Released = append(res.Released, got...)
	}
	if len(drop) == 0 {
		return nil
	}
	// The record first: a sweep cut short between the two leaves a held
	// task with its cancelled record, which the next sweep drops.
	if err := putResults(ctx, q.results, cancel); err != nil {
		return q.wrap(op, err)
	}
	got, err := hs.Drop(ctx, drop)
	if err != nil {
		return q.wrap(op, err)
	}
	res.Cancelled = append(res.Cancelled, got...)
	return nil
}

// tooFarAhead reports whether a message that may run at notBefore is
// further ahead of now than the backend can delay a push (MaxVisibility).
func (q *Queue) tooFarAhead(notBefore, now time.Time) bool {
	mv := q.caps.MaxVisibility
	return mv > 0 && notBefore.Sub(now) > mv
}

// verdict is what a sweep does with one held task: release it, cancel it
// for reason, or neither (wait).
type verdict struct {
	release bool
	reason  string
}

// verdict decides h from its parents' records rec (by ID) and its
// groups' counts, read into groups once per sweep page. A parent in
// again (pushed again: held or live now) whose record is not newer
// than h
// has not ended yet for h.
func (q *Queue) verdict(ctx context.Context, h *driver.HeldMessage, rec map[string]*driver.ResultRecord, again map[string]bool, groups map[string]*driver.GroupCounters) (verdict, error) {
	strict := h.Require != driver.RequireEnded
	for _, p := range h.After {
		r := rec[p]
		switch {
		case r == nil || !r.State.Final() || again[p] && !r.UpdatedAt.After(h.Created):
			return verdict{}, nil
		case strict && r.State != driver.ResultSucceeded:
			return verdict{reason: fmt.Sprintf("cancelled before it ran: task %s, which it runs after, was %s", p, r.State)}, nil
		}
	}
	if len(h.AfterGroups) > 0 && q.groups == nil {
		return verdict{}, nil // groups went unsupported after the push: nothing to read
	}
	for _, g := range h.AfterGroups {
		c, ok := groups[g]
		if !ok {
			var err error
			if c, err = q.groups.GroupCounts(ctx, g); err != nil {
				return verdict{}, q.wrap("sweep", err)
			}
			groups[g] = c
		}
		switch {
		case c == nil:
			return verdict{reason: fmt.Sprintf("cancelled before it ran: group %q, which it runs after, is no longer in the queue (forgotten after its retention)", g)}, nil
		case !c.Done():
			return verdict{}, nil
		case strict && c.DeadLettered+c.Cancelled > 0:
			// A group's step may be held again to run whatever the
			// outcome; a task pushed --after-group may not.
			hint := "it runs only if every task of the group succeeds"
			if strings.HasPrefix(h.Message.ID, thenPrefix) {
				hint = "it runs only if all succeed; --then-if always runs it anyway"
			}
			return verdict{reason: fmt.Sprintf("cancelled before it ran: group %q, which it runs after, ended with %d of %d tasks dead-lettered and %d cancelled (%s)",
				g, c.DeadLettered, c.Pushed, c.Cancelled, hint)}, nil
		}
	}
	if q.tooFarAhead(h.Message.NotBefore, time.Now()) {
		// Its parents ended, but the engine cannot hide a message that
		// long (Azure: 7 days): pushed now it would be refused, and fail
		// every sweep. It stays held until it fits.
		return verdict{}, nil
	}
	return verdict{release: true}, nil
}

// parentsPushedAgain returns the parents of page whose record (in rec) is
// not newer than a held task naming them (records and held
// tasks may keep milliseconds only) and that are held or live now: an
// earlier run of theirs left the record, and they were pushed again
// since, so that held task waits for their new end rather than deciding
// on the old one. The records of the others looked at are read again
// into rec, as one of them may have ended between the two reads. Only
// parents that ended before their dependant was held cost the look.
func (q *Queue) parentsPushedAgain(ctx context.Context, op string, page []*driver.HeldMessage, rec map[string]*driver.ResultRecord) (map[string]bool, error) {
	var ids []string
	seen := map[string]bool{}
	for _, h := range page {
		for _, p := range h.After {
			if r := rec[p]; r != nil && r.State.Final() && !r.UpdatedAt.After(h.Created) && !seen[p] {
				seen[p] = true
				ids = append(ids, p)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	present, ok, err := q.presentTasks(ctx, op, ids)
	if err != nil || !ok {
		return nil, err
	}
	var gone []string
	for _, id := range ids {
		if !present[id] {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return present, nil
	}
	recs, err := q.getResults(ctx, op, q.results, gone)
	if err != nil {
		return nil, err
	}
	for i, r := range recs {
		if r == nil {
			delete(rec, gone[i])
		} else {
			rec[gone[i]] = r
		}
	}
	return present, nil
}
