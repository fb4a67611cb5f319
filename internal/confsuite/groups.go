package confsuite

import (
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// groupChecks are the checks of task groups.
func groupChecks() []check {
	return []check{
		{"GroupCounts", checkGroupCounts},
		{"GroupDeadLetterRequeue", checkGroupDeadLetterRequeue},
		{"SkipSucceeded", checkSkipSucceeded},
		{"ExportResults", checkExportResults},
	}
}

// needGroups skips a check on a backend that counts no groups, after
// checking that a push with a group and a group's counts are refused
// there (Unimplemented) rather than ignored.
func (c *C) needGroups(q *handle) {
	c.Helper()
	if level(q, driver.Groups) != driver.Unsupported {
		return
	}
	_, err := q.Push(c.ctx(), &jobq.Task{Command: "echo grouped", Group: "conformance"})
	c.expectCode(err, errcode.Unimplemented, "a push with a group on a backend without groups")
	_, err = q.Admin().Group(c.ctx(), "conformance")
	c.expectCode(err, errcode.Unimplemented, "Admin.Group on a backend without groups")
	c.Skipf("groups are unsupported: %s", q.Capabilities().Features[driver.Groups].Fallback)
}

// checkGroupCounts: a group counts its tasks through every end state (a
// success, a failed attempt that is retried, a dead letter, a task
// cancelled while queued where cancel is native and one stopped by its
// worker), its open tasks split by where they are where the backend says
// so, and a task without a group counts nowhere. The counts are read
// after each step, so they are checked exact on native backends; an
// emulated one is polled until it catches up.
func checkGroupCounts(c *C) {
	q := c.open()
	c.needGroups(q)
	g := fmt.Sprintf("conformance-%d", time.Now().UnixNano())
	_, err := q.Admin().Group(c.ctx(), g)
	c.expectCode(err, errcode.NotFound, "Admin.Group of a group never pushed")

	names := []string{"succeeds", "fails then succeeds", "cancelled by its worker", "dead-lettered"}
	tasks := make([]*jobq.Task, len(names))
	for i, n := range names {
		tasks[i] = &jobq.Task{Command: "echo group " + n, Group: g, NumRetries: 1}
		if n == "fails then succeeds" {
			// Long enough that the retry is still delayed when the counts
			// are read on a loaded machine (200 ms was not).
			tasks[i].RetryBackoff = jobq.Backoff{Base: 3 * time.Second, Cap: 3 * time.Second}
		}
	}
	ids := map[string]string{}
	for i, id := range c.push(q, tasks...) {
		ids[id] = names[i]
	}
	c.push(q, task("not in the group"))
	want := driver.GroupCounters{Pushed: 4, Queued: 4}
	c.expectGroup(q, g, want, "after the push")

	dead := level(q, driver.DeadLetter) != driver.Unsupported
	vis := c.longVis(q)
	for id, e := range c.receiveAll(q, 5, vis) {
		c.settleGrouped(q, e, ids[id], g, dead, &want)
	}
	// The failed task is delayed by its retry backoff, or queued again at
	// once where a delayed requeue is emulated (visible at once).
	want.Queued, want.Delayed = 0, 1
	if level(q, driver.DelayedRequeue) != driver.Native {
		want.Queued, want.Delayed = 1, 0
	}
	c.expectGroup(q, g, want, "after every task was settled once")

	retried := c.receive(q, vis)
	if ids[retried.Task.ID] != "fails then succeeds" {
		c.Fatalf("received %s; want the retried task", retried.Task.ID)
	}
	want.Queued, want.Delayed, want.Running = 0, 0, 1
	c.expectGroup(q, g, want, "while the retry runs")
	c.complete(retried)
	want.Running, want.Succeeded = 0, want.Succeeded+1
	got := c.expectGroup(q, g, want, "after the retry succeeded")
	if !got.Done() {
		c.Errorf("every task of the group ended but Done() is false: %+v", got)
	}
	c.checkGroupCancel(q, g)
	gs, err := q.Admin().Groups(c.ctx(), 10)
	if err != nil {
		c.Fatalf("Admin.Groups: %v", err)
	}
	if len(gs) == 0 || gs[0].Name != g+"-cancel" && gs[0].Name != g {
		c.Errorf("Admin.Groups = %d groups (first %v); want the groups of this check, newest first", len(gs), gs)
	}
}

// checkGroupDeadLetterRequeue: a dead letter keeps its task's group, and
// a requeue from the dead letters (RequeueDeadLetters, and RequeueWhere
// where bulk actions are supported) puts the task back in it as an open
// task: the group counts one dead-lettered less, so it is not done until
// the task ends again, and that end is counted as usual (its record names
// the group). Native groups only: emulated ones are counted from the
// records, elsewhere.
func checkGroupDeadLetterRequeue(c *C) {
	q := c.open()
	c.needGroups(q)
	if level(q, driver.Groups) != driver.Native || level(q, driver.DeadLetter) == driver.Unsupported {
		c.Skipf("needs native groups and dead letters")
	}
	g := fmt.Sprintf("conformance-requeue-%d", time.Now().UnixNano())
	ids := c.push(q, &jobq.Task{Command: "echo group requeued", Group: g}, &jobq.Task{Command: "echo group succeeds", Group: g})
	vis := c.longVis(q)
	for id, e := range c.receiveAll(q, 2, vis) {
		if id == ids[1] {
			c.complete(e)
		} else if err := e.DeadLetter(c.ctx(), "conformance", ""); err != nil {
			c.Fatalf("dead-letter: %v", err)
		}
	}
	ended := driver.GroupCounters{Pushed: 2, Succeeded: 1, DeadLettered: 1}
	c.expectGroup(q, g, ended, "after one task succeeded and one was dead-lettered")
	requeues := c.deadRequeues(q)
	for i, r := range requeues {
		if n, err := r.requeue(); err != nil || n != 1 {
			c.Fatalf("%s = %d, %v; want 1 requeued", r.how, n, err)
		}
		got := c.expectGroup(q, g, driver.GroupCounters{Pushed: 2, Succeeded: 1, Queued: 1}, "after "+r.how+" requeued its dead letter")
		if got != nil && got.Done() {
			c.Errorf("group %s is done while its requeued task is queued (%s): %+v", g, r.how, got)
		}
		e := c.receive(q, vis)
		if e.Task.ID != ids[0] || e.Task.Group != g {
			c.Fatalf("after %s received task %s of group %q; want %s of group %q", r.how, e.Task.ID, e.Task.Group, ids[0], g)
		}
		if i < len(requeues)-1 {
			// Dead-lettered again, for the next way to requeue it.
			if err := e.DeadLetter(c.ctx(), "conformance", ""); err != nil {
				c.Fatalf("dead-letter: %v", err)
			}
			c.expectGroup(q, g, ended, "after the requeued task was dead-lettered again")
			continue
		}
		c.complete(e)
	}
	if got := c.expectGroup(q, g, driver.GroupCounters{Pushed: 2, Succeeded: 2}, "after the requeued task succeeded"); got != nil && !got.Done() {
		c.Errorf("every task of group %s ended but Done() is false: %+v", g, got)
	}
	if level(q, driver.Results) != driver.Unsupported {
		if r := c.result(q, ids[0]); r.Group != g || r.State != driver.ResultSucceeded {
			c.Errorf("record of the requeued task: state %s, group %q; want succeeded in group %q", r.State, r.Group, g)
		}
	}
}

// deadRequeue is one way to requeue every dead letter of a queue, which
// returns how many it requeued.
type deadRequeue struct {
	how     string
	requeue func() (int64, error)
}

// deadRequeues are the ways q can requeue its dead letters: by ID (all),
// and by filter where bulk actions are supported.
func (c *C) deadRequeues(q *handle) []deadRequeue {
	out := []deadRequeue{{"RequeueDeadLetters", func() (int64, error) { return q.Admin().RequeueDeadLetters(c.ctx()) }}}
	if level(q, driver.BulkActions) != driver.Unsupported {
		out = append(out, deadRequeue{"RequeueWhere", func() (int64, error) {
			r, err := q.Admin().RequeueWhere(c.ctx(), jobq.Filter{State: "dead-lettered"})
			return r.Done, err
		}})
	}
	return out
}

// settleGrouped settles e, the task of checkGroupCounts called name ("" for
// the one without a group), as its name says, and adds what that counts
// in group g to want.
func (c *C) settleGrouped(q *handle, e *jobq.Envelope, name, g string, dead bool, want *driver.GroupCounters) {
	c.Helper()
	// Emulated groups do not come back with the task (the Azure backends
	// keep them in the record store, not beside the message).
	if name != "" && e.Task.Group != g && level(q, driver.Groups) == driver.Native {
		c.Errorf("received task %q has group %q; want %q", e.Task.ID, e.Task.Group, g)
	}
	switch {
	case name == "":
		if e.Task.Group != "" {
			c.Errorf("a task pushed without a group was received with group %q", e.Task.Group)
		}
		c.complete(e)
	case name == "fails then succeeds":
		if _, err := e.Fail(c.ctx(), errors.New("first attempt fails"), ""); err != nil {
			c.Fatalf("fail: %v", err)
		}
		want.Failed++
	case name == "cancelled by its worker":
		if err := e.Cancel(c.ctx(), "stopped"); err != nil {
			c.Fatalf("cancel: %v", err)
		}
		want.Cancelled++
	case name == "dead-lettered" && dead:
		if err := e.DeadLetter(c.ctx(), "conformance", ""); err != nil {
			c.Fatalf("dead-letter: %v", err)
		}
		want.DeadLettered++
	default: // succeeds, or dead-lettered where the backend cannot
		c.complete(e)
		want.Succeeded++
	}
}

// checkGroupCancel: a queued task that Admin.Cancel removes counts as
// cancelled in its group (Cancel native), or once its worker drops it;
// either way an export of the group's records lists its record.
func (c *C) checkGroupCancel(q *handle, g string) {
	c.Helper()
	if level(q, driver.Results) == driver.Unsupported || level(q, driver.Cancel) == driver.Unsupported {
		return
	}
	g += "-cancel"
	id := c.push(q, &jobq.Task{Command: "echo group cancel", Group: g})[0]
	if _, err := q.Admin().Cancel(c.ctx(), id); err != nil {
		c.Fatalf("cancel: %v", err)
	}
	if level(q, driver.Cancel) != driver.Native {
		c.settleCancelled(q, c.receive(q, c.longVis(q)), id)
	}
	c.expectGroup(q, g, driver.GroupCounters{Pushed: 1, Cancelled: 1}, "after its only task was cancelled")
	// Its record is the group's, as a record of a task that ran is: an
	// export of the group's records lists it (where the records name
	// their group, or through the group's members where they do not).
	var got []string
	err := q.Admin().ExportResults(c.ctx(), driver.ResultFilter{Group: g, State: driver.ResultCancelled}, func(r *jobq.Result) error {
		got = append(got, r.ID)
		if r.Group != g {
			c.Errorf("exported record %s of group %s names group %q", r.ID, g, r.Group)
		}
		return nil
	})
	switch {
	case errcode.Of(err) == errcode.Unimplemented:
	case err != nil:
		c.Fatalf("export of the records of group %s: %v", g, err)
	case len(got) != 1 || got[0] != id:
		c.Errorf("export of the cancelled records of group %s = %v; want the task cancelled in it, %s", g, got, id)
	}
}

// expectGroup checks the counts of group g against want (Name, times and
// Split aside; the split only where the backend reports one), polling an
// emulated backend until they match. It returns the last counts read.
func (c *C) expectGroup(q *handle, g string, want driver.GroupCounters, when string) *driver.GroupCounters {
	c.Helper()
	var got *driver.GroupCounters
	var err error
	same := func() bool {
		got, err = q.Admin().Group(c.ctx(), g)
		if err != nil || got == nil {
			return false
		}
		w := want
		w.Name, w.Created, w.Updated, w.Split = got.Name, got.Created, got.Updated, got.Split
		if !got.Split {
			w.Queued, w.Delayed, w.Running = 0, 0, 0
		}
		if level(q, driver.Groups) != driver.Native {
			w.Failed = got.Failed // emulated groups may not count failed attempts (declared)
		} else if w.Delayed > 0 && got.Queued > 0 {
			// A retry backoff that has passed leaves it queued.
			w.Queued, w.Delayed = w.Queued+w.Delayed, 0
		}
		return *got == w
	}
	if level(q, driver.Groups) == driver.Native {
		if !same() {
			c.Errorf("group %s %s: %+v, %v; want %+v", g, when, got, err, want)
		}
		return got
	}
	if !c.poll(same) {
		c.Errorf("group %s %s: %+v, %v; want %+v (polled %v)", g, when, got, err, want, c.patience())
	}
	return got
}

// checkSkipSucceeded: PushOptions.SkipSucceeded leaves out the tasks whose
// ID has a succeeded record and pushes the others (one that was
// dead-lettered runs again); a task's group is not part of its ID, so a
// rerun in another group skips the same tasks.
func checkSkipSucceeded(c *C) {
	q := c.open()
	c.needResults(q)
	groups := level(q, driver.Groups) != driver.Unsupported
	sweep := func(group string) []*jobq.Task {
		ts := make([]*jobq.Task, 3)
		for i := range ts {
			ts[i] = &jobq.Task{Command: fmt.Sprintf("echo skip-succeeded %d", i)}
			if groups {
				ts[i].Group = group
			}
		}
		return ts
	}
	first, err := q.PushBatch(c.ctx(), sweep("first run"), jobq.PushOptions{})
	if err != nil {
		c.Fatalf("push: %v", err)
	}
	dead := level(q, driver.DeadLetter) != driver.Unsupported
	for id, e := range c.receiveAll(q, 3, c.longVis(q)) {
		if id == first[1].ID && dead {
			if err := e.DeadLetter(c.ctx(), "conformance", ""); err != nil {
				c.Fatalf("dead-letter: %v", err)
			}
			continue
		}
		c.complete(e)
	}
	for _, r := range first {
		c.result(q, r.ID)
	}
	again, err := q.PushBatch(c.ctx(), sweep("rerun"), jobq.PushOptions{SkipSucceeded: true})
	if err != nil {
		c.Fatalf("push again with SkipSucceeded: %v", err)
	}
	for i, r := range again {
		wantSkip := i != 1 || !dead
		if r.ID != first[i].ID {
			c.Errorf("task %d pushed again has ID %s; want %s (the same task, its group aside)", i, r.ID, first[i].ID)
		}
		if r.Skipped != wantSkip || r.Duplicate {
			c.Errorf("task %d pushed again: Skipped %v Duplicate %v; want Skipped %v (it succeeded: %v)", i, r.Skipped, r.Duplicate, wantSkip, wantSkip)
		}
	}
	if !dead {
		return
	}
	if level(q, driver.Dedup) == driver.Emulated {
		// Service Bus's duplicate detection drops a task ID pushed again
		// within its window, even one that ended (as declared).
		c.Logf("dedup is emulated (%s): the rerun's message may be dropped by the broker", q.Capabilities().Features[driver.Dedup].Fallback)
		return
	}
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != first[1].ID {
		c.Errorf("received %s after the rerun; want the task that was dead-lettered, %s", e.Task.ID, first[1].ID)
	}
	c.complete(e)
	c.receiveNone(q, time.Time{}, "the rerun pushed only the task that had not succeeded")
}

// exportRecords is how many records checkExportResults lists, unless the
// harness says fewer (Harness.ExportRecords).
const exportRecords = 100_000

// checkExportResults: the records of many tasks (100,000 unless the
// harness scales it down) come out of ResultLister in pages no larger than
// asked, each record exactly once, so an export holds one page at a time
// whatever their number; Admin.ExportResults streams them with the
// state, time and group filters.
func checkExportResults(c *C) {
	q := c.open()
	c.needResults(q)
	lister, ok := hooks.Driver(q.Queue).(driver.ResultLister)
	if !ok {
		c.skipNeeds("driver.ResultLister", "the backend cannot list its records")
	}
	store := hooks.Driver(q.Queue).(driver.ResultStore)
	n := c.h.ExportRecords
	if n == 0 {
		n = exportRecords
	}
	now := time.Now()
	dead, odd, recent := putExportRecords(c, store, n, now)
	listAllPages(c, lister, n)
	count := func(f driver.ResultFilter) int {
		k := 0
		if err := q.Admin().ExportResults(c.ctx(), f, func(r *jobq.Result) error {
			if f.Group != "" && r.Group != f.Group {
				return fmt.Errorf("record %s of group %q in an export of group %q", r.ID, r.Group, f.Group)
			}
			k++
			return nil
		}); err != nil {
			c.Fatalf("ExportResults(%+v): %v", f, err)
		}
		return k
	}
	for _, tt := range []struct {
		f    driver.ResultFilter
		want int
	}{
		{driver.ResultFilter{State: driver.ResultDeadLettered}, dead},
		{driver.ResultFilter{Group: "export-odd"}, odd},
		{driver.ResultFilter{Since: now.Add(-time.Minute)}, recent},
	} {
		if got := count(tt.f); got != tt.want {
			c.Errorf("ExportResults(%+v) streamed %d records; want %d", tt.f, got, tt.want)
		}
	}
}

// putExportRecords stores n records for checkExportResults: every tenth
// dead-lettered, the odd ones in group export-odd, every fourth written
// at now (the others an hour before). It returns how many of each.
func putExportRecords(c *C, store driver.ResultStore, n int, now time.Time) (dead, odd, recent int) {
	old := now.Add(-time.Hour)
	batch := make([]*driver.ResultRecord, 0, 500)
	flush := func() {
		if err := store.PutResults(c.ctx(), batch); err != nil {
			c.Fatalf("PutResults: %v", err)
		}
		batch = batch[:0]
	}
	for i := range n {
		r := &driver.ResultRecord{ID: fmt.Sprintf("export-%07d", i), State: driver.ResultSucceeded, UpdatedAt: old,
			ExpiresAt: now.Add(driver.DefaultRetention), Data: []byte(`{"v": 1}`)}
		if i%10 == 3 {
			r.State = driver.ResultDeadLettered
			dead++
		}
		if i%2 == 1 {
			r.Data = []byte(`{"v": 1, "group": "export-odd"}`)
			odd++
		}
		if i%4 == 0 {
			r.UpdatedAt = now
			recent++
		}
		batch = append(batch, r)
		if len(batch) == cap(batch) {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return dead, odd, recent
}

// listAllPages lists every record through lister in pages of 500 and
// checks that no page is larger, that the cursor advances, and that each
// of the n records comes once.
func listAllPages(c *C, lister driver.ResultLister, n int) {
	const limit = 500
	seen := make(map[string]bool, n)
	cursor, pages := "", 0
	for {
		recs, next, err := lister.ListResults(c.ctx(), driver.ResultFilter{}, cursor, limit)
		if err != nil {
			c.Fatalf("ListResults page %d: %v", pages+1, err)
		}
		pages++
		if len(recs) > limit {
			c.Fatalf("ListResults returned %d records; asked for at most %d", len(recs), limit)
		}
		for _, r := range recs {
			if seen[r.ID] {
				c.Fatalf("ListResults returned %s twice", r.ID)
			}
			seen[r.ID] = true
		}
		if next == "" {
			break
		}
		if next == cursor || pages > 4*n/limit+10 {
			c.Fatalf("ListResults does not advance: cursor %q after %d pages", next, pages)
		}
		cursor = next
	}
	if len(seen) != n {
		c.Errorf("ListResults met %d records in %d pages; want %d", len(seen), pages, n)
	}
}
