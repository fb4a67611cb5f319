package jobq

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
)

// Where records are emulated, a parent the broker dead-lettered (or an
// ai4s-jobq worker did) has no record, so its dependants and its group's
// step would wait until some wait found it in the dead letters. A sweep
// therefore also looks there (deadLook, at most every deadLookEvery per
// Queue) for the parents and the group members its held tasks still wait
// for, records those it finds, and decides again.

// deadSweep is the sweeps' reading of a queue's dead letters.
type deadSweep struct {
	mu   sync.Mutex // held by the sweep that looks
	look *deadLook  // nil until a sweep needs it
}

// waiting is what a sweep's held tasks still wait for: parents with no
// record of an end, and groups not done.
type waiting struct {
	look    *deadLook
	parents map[string]bool
	groups  map[string]bool
}

// sweepWaiting returns, with q.deadSweep.mu held, the waiting a sweep
// fills when a look at the dead letters is due; nil (and the lock not
// held) otherwise, or when another sweep of q is looking.
func (q *Queue) sweepWaiting() *waiting {
	if !q.deadSweep.mu.TryLock() {
		return nil
	}
	l := q.deadSweep.look
	if l == nil {
		if l = q.newDeadLook(); l != nil {
			l.next = time.Now() // sweeps ran before: no grace
		}
		q.deadSweep.look = l
	}
	if !l.due() {
		q.deadSweep.mu.Unlock()
		return nil
	}
	return &waiting{look: l, parents: map[string]bool{}, groups: map[string]bool{}}
}

// add notes what h, which stays held, waits for: its parents without a
// final record in rec, and its groups not done in groups (those read).
func (w *waiting) add(h *driver.HeldMessage, rec map[string]*driver.ResultRecord, groups map[string]*driver.GroupCounters) {
	if w == nil {
		return
	}
	for _, p := range h.After {
		if r := rec[p]; r == nil || !r.State.Final() {
			w.parents[p] = true
		}
	}
	for _, g := range h.AfterGroups {
		if c := groups[g]; c != nil && !c.Done() {
			w.groups[g] = true
		}
	}
}

// sweepDead looks for what w waits for in the dead letters (deadEnded,
// which records what it finds), and reports whether it found any.
func (q *Queue) sweepDead(ctx context.Context, w *waiting) bool {
	if w == nil || len(w.parents)+len(w.groups) == 0 {
		return false
	}
	ids := make([]string, 0, len(w.parents))
	for id := range w.parents {
		ids = append(ids, id)
	}
	if lister, ok := q.drv.(driver.GroupMemberLister); ok {
		for g := range w.groups {
			members, err := lister.GroupMembers(ctx, g)
			if err != nil {
				q.log.Warn("jobq: sweep could not list a group's tasks, so it cannot see those dead-lettered without a record (the next sweep tries again)", "queue", q.url, "group", g, "error", err)
				continue
			}
			ids = append(ids, members...)
		}
	}
	if len(ids) == 0 {
		return false
	}
	return q.deadEnded(ctx, "sweep", q.results, w.look, uniqueIDs(ids), &WaitOptions{}) != nil
}
