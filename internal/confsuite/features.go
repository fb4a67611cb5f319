package confsuite

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// checkDelayedPush: a task with a future NotBefore stays hidden until then
// where native; emulated delivers it eventually; unsupported is
// Unimplemented and stores nothing. A past NotBefore is an ordinary push.
func checkDelayedPush(c *C) {
	q := c.open()
	past := task("not before the past")
	past.NotBefore = time.Now().Add(-time.Hour)
	c.push(q, past)
	e := c.receive(q, c.longVis(q))
	c.complete(e)

	delay := 2 * c.vis()
	t := task("delayed push")
	t.NotBefore = time.Now().Add(delay)
	switch level(q, driver.DelayedPush) {
	case driver.Unsupported:
		_, err := q.Push(c.ctx(), t)
		c.expectCode(err, errcode.Unimplemented, "push with a future NotBefore on a backend without delayed push")
		c.receiveNone(q, time.Time{}, "the delayed push failed")
		return
	case driver.Emulated:
		id := c.push(q, t)[0]
		e := c.receive(q, c.longVis(q))
		if e.Task.ID != id {
			c.Errorf("received task %s, want %s", e.Task.ID, id)
		}
		c.complete(e)
		return
	}
	id := c.push(q, t)[0]
	c.receiveNone(q, t.NotBefore, fmt.Sprintf("the task was pushed with NotBefore %v in the future", delay))
	if st, err := q.Admin().Stats(c.ctx()); err != nil {
		c.Errorf("stats: %v", err)
	} else if level(q, driver.ExactCount) == driver.Native && st.Known.Delayed && time.Now().Before(t.NotBefore) && st.Delayed != 1 {
		c.Errorf("stats while the task waits for NotBefore: %+v, want Delayed 1", st)
	}
	e = c.receive(q, c.longVis(q))
	if early := time.Until(t.NotBefore); early > c.tolerance() {
		c.Errorf("the delayed task arrived %v before its NotBefore", early)
	}
	c.expectDelivery(e, id, 1, "after NotBefore")
	c.complete(e)
}

// checkPriority: higher priorities are received first, equal ones in push
// order, where native; otherwise every task is still delivered.
func checkPriority(c *C) {
	q := c.open()
	prios := []struct {
		name string
		p    int
	}{{"low 1", 0}, {"negative", -5}, {"high", 10}, {"low 2", 0}, {"mid", 5}}
	names := map[string]string{}
	for _, p := range prios {
		t := task("priority " + p.name)
		t.Priority = p.p
		names[c.push(q, t)[0]] = p.name
	}
	var got []string
	for range prios {
		e := c.receive(q, c.longVis(q))
		got = append(got, names[e.Task.ID])
		c.complete(e)
	}
	want := []string{"high", "mid", "low 1", "low 2", "negative"}
	switch level(q, driver.Priority) {
	case driver.Native:
		if !slices.Equal(got, want) {
			c.Errorf("received in order %q, want %q (higher priority first, then push order)", got, want)
		}
	default:
		c.Logf("priority %s: received in order %q", level(q, driver.Priority), got)
		slices.Sort(got)
		sorted := slices.Clone(want)
		slices.Sort(sorted)
		if !slices.Equal(got, sorted) {
			c.Errorf("received %q, want each of %q once", got, sorted)
		}
		if n := len(q.logs.warnings(string(driver.Priority))); n != 1 {
			c.Errorf("pushing with priorities on a backend where priority is %s logged %d warnings, want 1", level(q, driver.Priority), n)
		}
	}
}

// checkDeadLetter: DeadLetter moves the message aside, and the listing
// shows it with its reason and detail.
func checkDeadLetter(c *C) {
	q := c.open()
	id := c.push(q, task("dead letter"))[0]
	e := c.receive(q, c.longVis(q))
	const reason, detail = "conformance reason ✗", "detail line 1\nline 2 ünïcode"
	if level(q, driver.DeadLetter) == driver.Unsupported {
		c.expectCode(e.DeadLetter(c.ctx(), reason, detail), errcode.Unimplemented, "DeadLetter on a backend without dead letters")
		_, err := q.Admin().DeadLetters(c.ctx(), 10)
		c.expectCode(err, errcode.Unimplemented, "listing dead letters on a backend without dead letters")
		c.complete(e)
		return
	}
	if err := e.DeadLetter(c.ctx(), reason, detail); err != nil {
		c.Fatalf("dead-letter: %v", err)
	}
	c.receiveNone(q, time.Time{}, "the only message was dead-lettered")
	dead := c.listDead(q, 1)
	d := dead[0]
	if d.Task == nil || d.Task.ID != id {
		c.Errorf("dead letter holds task %v (decode error %v), want %s", d.Task, d.DecodeErr, id)
	}
	if !strings.Contains(d.Reason, reason) {
		c.Errorf("dead letter reason is %q, want it to contain %q", d.Reason, reason)
	}
	if !strings.Contains(d.Detail, detail) {
		c.Errorf("dead letter detail is %q, want it to contain %q", d.Detail, detail)
	}
	if d.MessageID == "" {
		c.Errorf("dead letter has no MessageID, so it cannot be requeued or purged")
	}
	if d.DeliveryCount != 0 && d.DeliveryCount != 1 {
		c.Errorf("dead letter DeliveryCount is %d after one delivery", d.DeliveryCount)
	}
	c.expectStats(q, want{dead: 1})
}

// listDead lists the dead letters, waiting until there are n.
func (c *C) listDead(q *handle, n int) []*jobq.DeadLetter {
	c.Helper()
	var dead []*jobq.DeadLetter
	var err error
	ok := c.poll(func() bool {
		dead, err = q.Admin().DeadLetters(c.ctx(), 100)
		if err != nil {
			c.Fatalf("list dead letters: %v", err)
		}
		return len(dead) >= n
	})
	if !ok || len(dead) != n {
		c.Fatalf("listed %d dead letters, want %d", len(dead), n)
	}
	return dead
}

// checkDeadLetterRequeuePurge: dead letters can be requeued and purged, by
// ID and all at once.
func checkDeadLetterRequeuePurge(c *C) {
	q := c.open()
	if level(q, driver.DeadLetter) == driver.Unsupported {
		_, err := q.Admin().RequeueDeadLetters(c.ctx())
		c.expectCode(err, errcode.Unimplemented, "requeuing dead letters on a backend without dead letters")
		_, err = q.Admin().PurgeDeadLetters(c.ctx())
		c.expectCode(err, errcode.Unimplemented, "purging dead letters on a backend without dead letters")
		return
	}
	ids := c.push(q, task("dlq a"), task("dlq b"), task("dlq c"))
	for _, e := range c.receiveAll(q, 3, c.longVis(q)) {
		if err := e.DeadLetter(c.ctx(), "to the dlq", ""); err != nil {
			c.Fatalf("dead-letter: %v", err)
		}
	}
	dead := c.listDead(q, 3)
	mid := map[string]string{} // task ID -> dead letter message ID
	for _, d := range dead {
		if d.Task != nil {
			mid[d.Task.ID] = d.MessageID
		}
	}
	n, err := q.Admin().RequeueDeadLetters(c.ctx(), mid[ids[0]], "no-such-dead-letter")
	if err != nil || n != 1 {
		c.Fatalf("requeue one dead letter (and an unknown ID): moved %d, error %v; want 1 and no error", n, err)
	}
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != ids[0] {
		c.Errorf("after requeuing dead letter %s received task %s", ids[0], e.Task.ID)
	}
	c.complete(e)
	c.listDead(q, 2)
	if n, err := q.Admin().PurgeDeadLetters(c.ctx(), mid[ids[1]]); err != nil || n != 1 {
		c.Fatalf("purge one dead letter: deleted %d, error %v; want 1", n, err)
	}
	left := c.listDead(q, 1)
	if left[0].Task == nil || left[0].Task.ID != ids[2] {
		c.Errorf("after requeuing %s and purging %s the dead letter left is %v, want %s", ids[0], ids[1], left[0].Task, ids[2])
	}
	if n, err := q.Admin().PurgeDeadLetters(c.ctx()); err != nil || n != 1 {
		c.Errorf("purge all dead letters: deleted %d, error %v; want 1", n, err)
	}
	if dead, err := q.Admin().DeadLetters(c.ctx(), 10); err != nil || len(dead) != 0 {
		c.Errorf("after purging all, listed %d dead letters (error %v)", len(dead), err)
	}
	c.receiveNone(q, time.Time{}, "the purged dead letters must not come back")
}

// checkRequeueDeadOfQueuedID: a dead letter whose task ID is queued
// again merges into that message when requeued (driver.GroupStore's
// contract): it leaves the dead letters and counts as moved, and the task
// runs once, not twice. Checked where dedup is native.
func checkRequeueDeadOfQueuedID(c *C) {
	q := c.open()
	if level(q, driver.DeadLetter) == driver.Unsupported || level(q, driver.Dedup) != driver.Native {
		return
	}
	t := task("dlq queued again")
	id := c.push(q, t)[0]
	if err := c.receive(q, c.longVis(q)).DeadLetter(c.ctx(), "to the dlq", ""); err != nil {
		c.Fatalf("dead-letter: %v", err)
	}
	dead := c.listDead(q, 1)
	if res, err := q.Push(c.ctx(), task("dlq queued again")); err != nil || res.Duplicate || res.ID != id {
		c.Fatalf("push of the dead-lettered task again: %+v, %v; want it stored under ID %s", res, err, id)
	}
	if n, err := q.Admin().RequeueDeadLetters(c.ctx(), dead[0].MessageID); err != nil || n != 1 {
		c.Fatalf("requeue of the dead letter whose task is queued again: moved %d, error %v; want 1 (merged)", n, err)
	}
	if left, err := q.Admin().DeadLetters(c.ctx(), 10); err != nil || len(left) != 0 {
		c.Errorf("after the requeue %d dead letters are left (error %v); want the merged one gone", len(left), err)
	}
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != id {
		c.Errorf("received task %s, want %s", e.Task.ID, id)
	}
	c.complete(e)
	c.receiveNone(q, time.Time{}, "the dead letter merged into the queued copy: the task runs once")
}

// checkFailRetryBudget: Fail requeues while the retry budget lasts, then
// dead-letters with the cause.
func checkFailRetryBudget(c *C) {
	q := c.open()
	t := task("fail")
	t.NumRetries = 2
	t.RetryBackoff = quickRetry // the retries' timing is checkRetryBackoff's
	id := c.push(q, t)[0]
	inPlace := level(q, driver.InPlaceUpdate) == driver.Native
	for attempt := 1; attempt <= 3; attempt++ {
		e := c.receive(q, c.longVis(q))
		c.expectDelivery(e, id, attempt, fmt.Sprintf("attempt %d", attempt))
		left := 3 - attempt
		if inPlace && e.Task.NumRetries != left {
			c.Errorf("attempt %d: task carries num_retries %d, want %d (in-place update is native, so Fail must decrement it)", attempt, e.Task.NumRetries, left)
		}
		if got := e.RetriesLeft(); got != left {
			c.Errorf("attempt %d: RetriesLeft is %d, want %d", attempt, got, left)
		}
		cause := fmt.Errorf("boom %d", attempt)
		res, err := e.Fail(c.ctx(), cause, "tail of output")
		if attempt == 3 && level(q, driver.DeadLetter) == driver.Unsupported {
			c.expectCode(err, errcode.Unimplemented, "Fail past the budget on a backend without dead letters")
			c.complete(e)
			return
		}
		if err != nil {
			c.Fatalf("attempt %d: fail: %v", attempt, err)
		}
		if wantRetry := attempt < 3; res.Retried != wantRetry || (wantRetry && res.RetriesLeft != left-1) {
			c.Errorf("attempt %d: Fail returned %+v, want Retried %v with %d left", attempt, res, wantRetry, max(0, left-1))
		}
	}
	c.receiveNone(q, time.Time{}, "the task failed past its retry budget")
	d := c.listDead(q, 1)[0]
	if d.Task == nil || d.Task.ID != id {
		c.Errorf("dead letter holds %v, want task %s", d.Task, id)
	}
	if !strings.Contains(d.Reason, "boom 3") || !strings.Contains(d.Detail, "tail of output") {
		c.Errorf("dead letter reason %q and detail %q should carry the cause and the output tail", d.Reason, d.Detail)
	}
	if !inPlace {
		if n := len(q.logs.warnings(string(driver.InPlaceUpdate))); n != 1 {
			c.Errorf("retrying without in-place update logged %d warnings, want 1", n)
		}
	}
}

// checkPoison: an undecodable message is dead-lettered as poison, never
// returned, and does not block the messages behind it.
func checkPoison(c *C) {
	if !c.canPushRaw() {
		c.Skipf("Harness.PushRaw is not set, so the suite cannot store an undecodable message; set it (conformance.RawPusher), or give the harness NewDriver, to check poison handling")
	}
	q := c.open()
	raw := []byte("this is not a jobq task {")
	if _, err := c.pushRaw(q, raw); err != nil {
		c.Fatalf("push a raw poison message: %v", err)
	}
	id := c.push(q, task("behind the poison"))[0]
	e := c.receive(q, c.vis())
	if e.Task.ID != id {
		c.Errorf("received %s, want the good task %s", e.Task.ID, id)
	}
	c.complete(e)
	if level(q, driver.DeadLetter) == driver.Unsupported {
		c.receiveNone(q, time.Time{}, "an undecodable message must never be returned")
		return
	}
	d := c.listDead(q, 1)[0]
	if d.DecodeErr == nil {
		c.Errorf("the poison dead letter decodes without error: %+v", d)
	}
	if !strings.Contains(strings.ToLower(d.Reason), "poison") {
		c.Errorf("poison dead letter reason %q does not say poison", d.Reason)
	}
	if string(d.Body) != string(raw) {
		c.Errorf("poison dead letter body is %q, want the raw %q", d.Body, raw)
	}
	if len(q.logs.find(slog.LevelDebug, "poison")) == 0 {
		c.Errorf("no log record mentions the poison message")
	}
	c.receiveNone(q, time.Time{}, "the poison message was dead-lettered")
}

// checkDedup: with native dedup, pushing a task whose ID is queued is
// reported as a duplicate and stores nothing; emulated dedup drops it
// (perhaps silently); without dedup both are delivered.
func checkDedup(c *C) {
	q := c.open()
	r := c.pushDuplicates(q)
	lvl := level(q, driver.Dedup)
	want := 3
	switch lvl {
	case driver.Native:
		c.expectDuplicateFlags(r)
	case driver.Unsupported:
		want = 6
		if r.again.Duplicate || r.explicit[1].Duplicate || r.mixed[0].Duplicate {
			c.Errorf("a push was reported duplicate although dedup is unsupported")
		}
	}
	got := map[string]int{}
	for range want {
		e := c.receive(q, c.longVis(q))
		got[e.Task.ID]++
		if e.Task.ID == "conformance-explicit-id" && lvl != driver.Unsupported && e.Task.Command != "echo one" {
			c.Errorf("dedup kept the second task with ID %s (%q), want the first", e.Task.ID, e.Task.Command)
		}
		c.complete(e)
	}
	c.receiveNone(q, time.Time{}, fmt.Sprintf("dedup is %s, so %d messages were stored", lvl, want))
	if lvl != driver.Unsupported && (got[r.first.ID] != 1 || got["conformance-explicit-id"] != 1 || got[r.mixed[1].ID] != 1) {
		c.Errorf("received %v, want each ID once", got)
	}
}

// dedupPushes are the results of checkDedup's pushes.
type dedupPushes struct {
	first, again    jobq.PushResult   // one task pushed twice
	explicit, mixed []jobq.PushResult // two tasks with one explicit ID; a queued task and a new one
}

// pushDuplicates pushes checkDedup's tasks: one task twice, a batch of two
// tasks with one explicit ID, and a batch of a queued task and a new one.
func (c *C) pushDuplicates(q *handle) dedupPushes {
	var r dedupPushes
	var err error
	if r.first, err = q.Push(c.ctx(), task("dedup")); err != nil {
		c.Fatalf("push: %v", err)
	}
	if r.again, err = q.Push(c.ctx(), task("dedup")); err != nil { // same content: same deterministic ID
		c.Fatalf("push the same task again: %v", err)
	}
	if r.first.ID != r.again.ID {
		c.Fatalf("the same task got IDs %s and %s; deterministic IDs must match", r.first.ID, r.again.ID)
	}
	explicit := []*jobq.Task{{ID: "conformance-explicit-id", Command: "echo one"}, {ID: "conformance-explicit-id", Command: "echo two"}}
	if r.explicit, err = q.PushBatch(c.ctx(), explicit, jobq.PushOptions{}); err != nil {
		c.Fatalf("push two tasks with one explicit ID: %v", err)
	}
	if r.mixed, err = q.PushBatch(c.ctx(), []*jobq.Task{task("dedup"), task("dedup, new")}, jobq.PushOptions{}); err != nil {
		c.Fatalf("push a batch of a queued task and a new one: %v", err)
	}
	return r
}

// expectDuplicateFlags checks native dedup's reports: each repeat is a
// duplicate, each first push is not.
func (c *C) expectDuplicateFlags(r dedupPushes) {
	if r.first.Duplicate || !r.again.Duplicate || r.explicit[0].Duplicate || !r.explicit[1].Duplicate {
		c.Errorf("Duplicate flags %v %v (same content) and %v %v (same ID): want false true false true",
			r.first.Duplicate, r.again.Duplicate, r.explicit[0].Duplicate, r.explicit[1].Duplicate)
	}
	if !r.mixed[0].Duplicate || r.mixed[1].Duplicate {
		c.Errorf("Duplicate flags %v %v for a batch of a queued task and a new one: want true false", r.mixed[0].Duplicate, r.mixed[1].Duplicate)
	}
}
