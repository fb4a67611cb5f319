package jobq

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
)

// Where a backend's result records are emulated (kept in another store,
// written by a jobq worker before it settles), a task can end in the dead
// letters with no record: the engine dead-letters it (Service Bus, past the
// queue's max delivery count or at its time-to-live), or a worker that
// keeps no records (ai4s-jobq) does. A wait would never end for it, so a
// wait that has gone on for deadLookAfter also reads the dead letters and
// records the end of each task waited for that it finds there. Each look
// reads the next page of all the letters (from the first again after the
// last) and, where the driver can find the recent ones (DeadSincer), up to
// deadLookTailPages pages of those dated since the wait began (less
// deadLookSkew), from where the last look stopped (readTail): a task
// pushed just before the wait and dead-lettered while it goes on is found
// within a few looks however many older letters there are. Looks are deadLookEvery apart, or waitReadShare times
// as long as the last one took when that is longer.
const (
	deadLookAfter     = 10 * time.Second
	deadLookEvery     = 10 * time.Second
	deadLookPage      = 250
	deadLookTailPages = 4
	deadLookSkew      = time.Minute
)

// deadLook is where a wait is in its reading of the dead letters.
type deadLook struct {
	after    string        // the cursor of the next page of all; "" the first
	start    string        // the cursor before the recent letters (DeadSincer)
	tail     string        // where the next look reads them from
	tailSet  bool          // start was found
	since    time.Time     // the recent letters are those dead-lettered since
	next     time.Time     // the earliest next look
	page     int           // letters a page
	every    time.Duration // between looks, at least
	looks    int           // looks begun
	testLook func(n int)
	warned   bool // a failed look was logged
}

// deadLookTest is what the tests change of q's looks (hooks.DeadLookTest).
type deadLookTest struct {
	after, every time.Duration
	page         int
	look         func(n int)
}

// newDeadLook returns the dead-letter reader of a wait, nil when the
// backend's dead letters always have a record (results native) or there
// are none.
func (q *Queue) newDeadLook() *deadLook {
	if q.caps.Level(driver.Results) != driver.Emulated || q.caps.Level(driver.DeadLetter) == driver.Unsupported {
		return nil
	}
	now := time.Now()
	l := &deadLook{next: now.Add(deadLookAfter), since: now.Add(-deadLookSkew), page: deadLookPage, every: deadLookEvery}
	if t := q.deadTest.Load(); t != nil {
		l.next, l.every, l.testLook = now.Add(t.after), t.every, t.look
		if t.page > 0 {
			l.page = t.page
		}
	}
	return l
}

// due reports whether a look is due (never when l is nil).
func (l *deadLook) due() bool { return l != nil && !time.Now().Before(l.next) }

// groupDeadEnded is deadEnded for the members of group name, where the
// driver lists them (driver.GroupMemberLister): the records it stores
// count as ends in the group's counts.
func (q *Queue) groupDeadEnded(ctx context.Context, name string, l *deadLook) {
	const op = "group"
	lister, ok := q.drv.(driver.GroupMemberLister)
	if !ok || !l.due() || q.results == nil {
		return
	}
	members, err := lister.GroupMembers(ctx, name)
	if err != nil {
		l.next = time.Now().Add(l.every)
		if !l.warned && ctx.Err() == nil {
			l.warned = true
			q.log.Warn("jobq: group wait could not list the group's tasks, so it cannot see those dead-lettered without a record (it goes on, and tries again)", "queue", q.url, "group", name, "error", err)
		}
		return
	}
	q.deadEnded(ctx, op, q.results, l, members, &WaitOptions{})
}

// readDead reads l's next page of all the dead letters, and the recent
// ones after l's tail (readTail). Where the driver cannot page, it reads
// the first deadLookPage letters, no more than a peek returns (MaxPeek:
// Storage Queue reads more by dequeuing them, which a wait must not do).
func (q *Queue) readDead(ctx context.Context, l *deadLook) ([]*driver.DeadMessage, error) {
	p, ok := q.drv.(driver.Pager)
	if !ok {
		window := l.page
		if mp := q.caps.MaxPeek; mp > 0 {
			window = min(window, mp)
		}
		return q.drv.ListDead(ctx, window)
	}
	ms, next, err := p.PageDead(ctx, l.after, l.page)
	if err != nil {
		return nil, err
	}
	recent, err := q.readTail(ctx, p, l)
	if err != nil {
		return nil, err
	}
	l.after = next // once the look succeeds, so that no page is skipped
	return append(ms, recent...), nil
}

// readTail reads, where the driver is a DeadSincer, up to
// deadLookTailPages pages of the recent dead letters, those after l's
// start (found at the first look), from where the last look stopped, and
// from the start again once it has read to the end. Reading them all again
// finds a letter that lands among them rather than after them: Azure
// keeps a message's sequence number when it dead-letters it, so a task
// pushed early and dead-lettered late sorts before letters already read.
func (q *Queue) readTail(ctx context.Context, p driver.Pager, l *deadLook) ([]*driver.DeadMessage, error) {
	s, ok := q.drv.(driver.DeadSincer)
	if !ok {
		return nil, nil
	}
	if !l.tailSet {
		c, err := s.DeadSince(ctx, l.since)
		if err != nil {
			return nil, err
		}
		l.start, l.tail, l.tailSet = c, c, true
	}
	var out []*driver.DeadMessage
	tail := l.tail
	for range deadLookTailPages {
		ms, next, err := p.PageDead(ctx, tail, l.page)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
		if next == "" {
			tail = l.start
			break
		}
		tail = next
	}
	l.tail = tail
	return out, nil
}

// deadEnded looks, when l is due, for the tasks of pending among the next
// dead letters (readDead) (one dead-lettered at or after after, when after is
// set) that have no record of an end, stores a DeadLettered record for
// each, with the dead letter's reason, and returns the records aligned with
// pending (nil for the others), or nil when it found none. A look that
// fails is logged once, and the wait goes on; a record that cannot be
// stored is logged, and the end reported all the same.
func (q *Queue) deadEnded(ctx context.Context, op string, store driver.ResultStore, l *deadLook, pending []string, opts *WaitOptions) []*driver.ResultRecord {
	if !l.due() {
		return nil
	}
	l.looks++
	if l.testLook != nil {
		l.testLook(l.looks)
	}
	began := time.Now()
	found, err := q.findDead(ctx, op, store, l, pending, opts)
	l.next = time.Now().Add(max(l.every, waitReadShare*time.Since(began)))
	if err != nil {
		if !l.warned && ctx.Err() == nil {
			l.warned = true
			q.log.Warn("jobq: wait could not read the dead letters, so it cannot see tasks dead-lettered without a record (it goes on, and tries again)", "queue", q.url, "error", err)
		}
		return nil
	}
	if len(found) == 0 {
		return nil
	}
	recs := make([]*driver.ResultRecord, 0, len(found))
	for _, r := range found {
		recs = append(recs, r)
	}
	if err := putResults(ctx, store, recs); err != nil {
		q.log.Warn("jobq: could not store the records of tasks found in the dead letters; the wait reports them all the same", "queue", q.url, "tasks", len(recs), "error", err)
	}
	aligned := make([]*driver.ResultRecord, len(pending))
	for i, id := range pending {
		aligned[i] = found[id]
	}
	return aligned
}

// reportDead reports the tasks of pending that deadEnded finds, and
// returns those left.
func (q *Queue) reportDead(ctx context.Context, op string, store driver.ResultStore, l *deadLook, pending []string, opts *WaitOptions, each func(*Result) error) ([]string, error) {
	recs := q.deadEnded(ctx, op, store, l, pending, opts)
	if recs == nil {
		return pending, nil
	}
	left, _, _, err := q.reportEnded(ctx, op, pending, recs, opts, each)
	return left, err
}

// findDead reads l's next dead letters (readDead) and returns, by task ID,
// the DeadLettered records of the tasks of pending it holds that, read
// after the page, have no record of an end opts counts. A dead letter
// counts from opts.After, by its own time.
func (q *Queue) findDead(ctx context.Context, op string, store driver.ResultStore, l *deadLook, pending []string, opts *WaitOptions) (map[string]*driver.ResultRecord, error) {
	after := opts.After
	ms, err := q.readDead(ctx, l)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(pending))
	for _, id := range pending {
		want[id] = true
	}
	dead := map[string]*driver.DeadMessage{}
	var ids []string
	for _, m := range ms {
		if m.ID == "" || !want[m.ID] || (!after.IsZero() && m.DeadAt.Before(after)) {
			continue
		}
		if dead[m.ID] == nil {
			ids = append(ids, m.ID)
		}
		dead[m.ID] = m
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// Read after the dead letters: a jobq worker stores its record before
	// it dead-letters, so a record is seen here and kept.
	recs, err := q.getResults(ctx, op, store, ids)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	found := make(map[string]*driver.ResultRecord, len(ids))
	for i, id := range ids {
		if opts.ends(id, recs[i]) {
			continue
		}
		m := dead[id]
		found[id] = q.newRecord(ctx, id, driver.ResultDeadLettered, now, &recordDetails{
			deliveries: m.DeliveryCount, errText: deadLetterText(m), ended: m.DeadAt})
	}
	return found, nil
}

// deadLetterText is the error of the record of a task found in the dead
// letters without one.
func deadLetterText(m *driver.DeadMessage) string {
	s := "dead-lettered with no record of its end (by the broker, or by a worker that keeps none); dead letter " + m.MessageID
	if m.Reason != "" {
		s += ", reason " + m.Reason
	}
	if m.Detail != "" {
		s += ": " + m.Detail
	}
	return s
}
