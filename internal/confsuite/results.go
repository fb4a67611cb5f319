package confsuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// resultChecks are the checks of task results, cancel and retry backoff
// (docs/results.md).
func resultChecks() []check {
	return []check{
		{"ResultRecords", checkResultRecords},
		{"ResultRetention", checkResultRetention},
		{"WaitResults", checkWaitResults},
		{"WaitGone", checkWaitGone},
		{"WaitSkewedWorker", checkWaitSkewedWorker},
		{"CancelQueued", checkCancelQueued},
		{"CancelDelayed", checkCancelDelayed},
		{"CancelRunning", checkCancelRunning},
		{"CancelInterrupted", checkCancelInterrupted},
		{"CancelBeforePush", checkCancelBeforePush},
		{"DeadLetterRequeueRecord", checkDeadLetterRequeueRecord},
		{"RetryBackoff", checkRetryBackoff},
		{"TaskSettingsRoundTrip", checkTaskSettingsRoundTrip},
		{"QueueWidePolicies", checkQueueWidePolicies},
		{"ResultsPolicy", checkResultsPolicy},
	}
}

// checkQueueWidePolicies: the retention and retry-backoff policies, which
// the portable layer applies itself, are stored and listed like the others
// (on every backend that keeps policies), replaced when set again, and
// unset; the queue's retries then follow the policy.
func checkQueueWidePolicies(c *C) {
	q := c.open()
	c.needPolicyStore(q, "the retention and retry-backoff policies")
	want := []driver.Policy{driver.Retention(36 * time.Hour), driver.RetryBackoff(1500*time.Millisecond, 2*time.Hour)}
	for _, p := range append([]driver.Policy{driver.Retention(time.Hour)}, want...) {
		if err := q.Admin().SetPolicy(c.ctx(), p); err != nil {
			c.Fatalf("set %v: %v", p, err)
		}
	}
	got, err := q.Admin().Policies(c.ctx())
	if err != nil {
		c.Fatalf("policy list: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		c.Errorf("policy list = %v, want %v", got, want)
	}
	if ks, err := q.Admin().PolicyKeyStats(c.ctx()); err != nil || len(ks) != 0 {
		c.Errorf("key stats with only queue-wide policies = %v, %v; want none", ks, err)
	}
	// A task without a backoff of its own takes the queue's.
	t := task("policy backoff")
	t.NumRetries = 1
	c.push(q, t)
	res, err := c.receive(q, c.longVis(q)).Fail(c.ctx(), errors.New("conformance failure"), "")
	if err != nil || !res.Retried {
		c.Fatalf("Fail = %+v, %v; want a retry", res, err)
	}
	if level(q, driver.DelayedRequeue) != driver.Unsupported && (res.Delay < 750*time.Millisecond || res.Delay > 1500*time.Millisecond) {
		c.Errorf("the first retry waits %v; want 0.75s..1.5s from the queue's retry-backoff %v", res.Delay, want[1])
	}
	c.complete(c.receive(q, c.longVis(q)))
	for _, p := range want {
		if ok, err := q.Admin().UnsetPolicy(c.ctx(), p.Kind, ""); err != nil || !ok {
			c.Errorf("unset %s: %v, %v; want true, nil", p.Kind, ok, err)
		}
	}
	if got, err := q.Admin().Policies(c.ctx()); err != nil || len(got) != 0 {
		c.Errorf("policy list after unsetting = %v, %v; want none", got, err)
	}
}

// needResults returns when the backend keeps result records; where it
// does not, it checks that asking for one is Unimplemented and settling
// still works, and skips the check.
func (c *C) needResults(q *handle) {
	c.Helper()
	if level(q, driver.Results) != driver.Unsupported {
		return
	}
	_, err := q.Result(c.ctx(), "no-such-task")
	c.expectCode(err, errcode.Unimplemented, "Result on a backend that keeps no results")
	_, err = q.Wait(c.ctx(), "no-such-task")
	c.expectCode(err, errcode.Unimplemented, "Wait on a backend that keeps no results")
	c.push(q, task("no results kept"))
	c.complete(c.receive(q, c.longVis(q)))
	c.skipNeeds("driver.ResultStore (feature results)", "results are unsupported: "+q.Capabilities().Features[driver.Results].Fallback)
}

// result reads the record of task id, failing the check when there is none.
func (c *C) result(q *handle, id string) *jobq.Result {
	c.Helper()
	var r *jobq.Result
	var err error
	// Where records live in another store than the queue, they may show a
	// moment after the settlement.
	if !c.poll(func() bool {
		r, err = q.Result(c.ctx(), id)
		return err == nil
	}) {
		c.Fatalf("the result of task %s: %v", id, err)
	}
	return r
}

// checkResultRecords: every end leaves a record with what the worker told
// it: a success with its value and output, a dead letter with its reason,
// a failure past its retries, a cancelled task.
func checkResultRecords(c *C) {
	q := c.open()
	c.needResults(q)
	ends := resultEnds(c, level(q, driver.DeadLetter) != driver.Unsupported)
	ids := map[string]resultEnd{}
	for _, en := range ends {
		ids[c.push(q, task("result "+en.name))[0]] = en
	}
	for id, e := range c.receiveAll(q, len(ends), c.longVis(q)) {
		hooks.RecordAttempt(e, jobq.Attempt{Worker: "conformance-worker", Host: "conformance-host", Start: time.Now(), Outcome: jobq.OutcomeSuccess})
		if err := ids[id].settle(e); err != nil {
			c.Fatalf("settle the %s task: %v", ids[id].name, err)
		}
	}
	for id, en := range ids {
		en.check(c, id, c.result(q, id))
	}
	c.receiveNone(q, time.Time{}, "every task ended")
	_, err := q.Result(c.ctx(), "conformance-never-pushed")
	c.expectCode(err, errcode.NotFound, "Result of a task that was never pushed")
}

// A resultEnd is one way a task ends in checkResultRecords, and the record
// it leaves.
type resultEnd struct {
	name     string
	settle   func(e *jobq.Envelope) error
	state    driver.ResultState
	errSub   string
	output   string
	value    string
	exitCode *int // the record's exit code, where the check sets one
}

// resultEnds are the ends checkResultRecords tries: dead is whether the
// backend dead-letters.
func resultEnds(c *C, dead bool) []resultEnd {
	ends := []resultEnd{
		{name: "succeeded", settle: func(e *jobq.Envelope) error {
			e.SetResult(jobq.ResultDetails{Output: "all done ✓\n", Value: json.RawMessage(`{"answer": 42}`)})
			return e.Complete(c.ctx())
		}, state: driver.ResultSucceeded, output: "all done ✓\n", value: `{"answer": 42}`},
		{name: "cancelled", settle: func(e *jobq.Envelope) error { return e.Cancel(c.ctx(), "conformance cancel") },
			state: driver.ResultCancelled, errSub: "conformance cancel"},
	}
	if !dead {
		return ends
	}
	code := 3
	return append(ends,
		resultEnd{name: "dead-lettered", settle: func(e *jobq.Envelope) error {
			e.SetResult(jobq.ResultDetails{ExitCode: &code, Output: "tail of the output"})
			return e.DeadLetter(c.ctx(), "conformance reason", "detail")
		}, state: driver.ResultDeadLettered, errSub: "conformance reason", output: "tail of the output", exitCode: &code},
		resultEnd{name: "failed past its retries", settle: func(e *jobq.Envelope) error {
			_, err := e.Fail(c.ctx(), errors.New("boom"), "the detail is the output")
			return err
		}, state: driver.ResultDeadLettered, errSub: "boom", output: "the detail is the output"})
}

// check checks r, the record of task id, which ended so.
func (en resultEnd) check(c *C, id string, r *jobq.Result) {
	c.Helper()
	switch {
	case r.ID != id || r.State != en.state:
		c.Errorf("%s task: record %s in state %s; want %s in state %s", en.name, r.ID, r.State, id, en.state)
	case !strings.Contains(r.Error, en.errSub) || (en.errSub == "" && r.Error != ""):
		c.Errorf("%s task: record error %q; want %q", en.name, r.Error, en.errSub)
	case r.Output != en.output || string(r.Value) != en.value:
		c.Errorf("%s task: record output %q value %s; want %q and %s", en.name, r.Output, r.Value, en.output, en.value)
	case r.Worker != "conformance-worker" || r.Host != "conformance-host" || r.Started.IsZero() || r.Finished.IsZero():
		c.Errorf("%s task: record worker %q host %q started %v finished %v; want the recorded attempt's", en.name, r.Worker, r.Host, r.Started, r.Finished)
	case r.DeliveryCount != 1:
		c.Errorf("%s task: record delivery count %d; want 1", en.name, r.DeliveryCount)
	case time.Until(r.ExpiresAt) < driver.DefaultRetention-time.Hour:
		c.Errorf("%s task: record expires at %v; want the default retention (%v) from now", en.name, r.ExpiresAt, driver.DefaultRetention)
	}
	if en.exitCode != nil && (r.ExitCode == nil || *r.ExitCode != *en.exitCode) {
		c.Errorf("%s task: record exit code %v; want %d", en.name, r.ExitCode, *en.exitCode)
	}
}

// checkResultRetention: a record lives for the queue's retention policy
// and is gone after it, whether the engine purged it or not; PurgeResults
// deletes what expired.
func checkResultRetention(c *C) {
	q := c.open()
	c.needResults(q)
	c.needPolicyStore(q, fmt.Sprintf("a retention policy (records live for the default %v)", driver.DefaultRetention))
	const keep = 2 * time.Second
	if err := q.Admin().SetPolicy(c.ctx(), driver.Retention(keep)); err != nil {
		c.Fatalf("set retention %v: %v", keep, err)
	}
	id := c.push(q, task("short-lived result"))[0]
	c.complete(c.receive(q, c.longVis(q)))
	r := c.result(q, id)
	if left := time.Until(r.ExpiresAt); left > keep || left < -c.tolerance() {
		c.Errorf("record expires in %v; want within the %v retention", left, keep)
	}
	time.Sleep(time.Until(r.ExpiresAt) + c.tolerance())
	_, err := q.Result(c.ctx(), id)
	c.expectCode(err, errcode.NotFound, "Result after the retention passed")
	if _, err := q.Admin().PurgeResults(c.ctx()); err != nil {
		c.Errorf("PurgeResults: %v", err)
	}
	if _, err := q.Result(c.ctx(), id); errcode.Of(err) != errcode.NotFound {
		c.Errorf("Result after PurgeResults: %v; want NotFound", err)
	}
}

// checkWaitResults: Wait reports a task that ended before it started at
// once, and the others as they end, including one that failed.
func checkWaitResults(c *C) {
	q := c.open()
	c.needResults(q)
	ids := c.push(q, task("wait early"))
	early := c.receive(q, c.longVis(q))
	c.complete(early)
	ids = append(ids, c.push(q, task("wait succeeds"), task("wait fails"))...)
	w := c.waitFunc(q, ids)
	first := w.next("a task had ended before the wait began")
	if first.r.ID != early.Task.ID || first.r.State != driver.ResultSucceeded {
		c.Errorf("the first report is %s in state %s; want %s, which had succeeded before the wait", first.r.ID, first.r.State, early.Task.ID)
	}
	dead := level(q, driver.DeadLetter) != driver.Unsupported
	for i := range 2 {
		e := c.receive(q, c.longVis(q))
		if len(w.seen) > 1+i {
			c.Errorf("WaitFunc reported %v before the other tasks ended", w.seen)
		}
		if e.Task.ID == ids[2] && dead {
			if _, err := e.Fail(c.ctx(), errors.New("conformance failure"), ""); err != nil {
				c.Fatalf("fail: %v", err)
			}
		} else {
			c.complete(e)
		}
		w.next("a task ended")
	}
	if rep := <-w.got; rep.err != nil || rep.r != nil {
		c.Errorf("WaitFunc after every task ended: %+v; want it to return nil", rep)
	}
	want := map[string]driver.ResultState{ids[0]: driver.ResultSucceeded, ids[1]: driver.ResultSucceeded, ids[2]: driver.ResultDeadLettered}
	if !dead {
		want[ids[2]] = driver.ResultSucceeded
	}
	if fmt.Sprint(w.seen) != fmt.Sprint(want) {
		c.Errorf("WaitFunc reported %v; want %v", w.seen, want)
	}
	rs, err := q.Wait(c.ctx(), ids[2], ids[0])
	if err != nil || len(rs) != 2 || rs[0].ID != ids[2] || rs[1].ID != ids[0] {
		c.Errorf("Wait for ended tasks: %v, %v; want their results in the order asked", rs, err)
	}
}

// checkWaitGone: where the backend can look tasks up by ID (it declares
// dependencies natively), the tasks a wait would wait for in vain now are
// told apart (the CLI's wait says so): neither queued, running nor held
// and without a record of an end, as after a clear or for an ID never
// pushed. A task that ended, and a held one, are not among them; one that
// ended before the time a wait counts ends from is told apart too (early).
// A wait for such a task still goes on (one may yet be pushed with the ID).
func checkWaitGone(c *C) {
	q := c.open()
	c.needResults(q)
	done := c.push(q, task("gone: ends"))[0]
	running := c.push(q, task("gone: running"))[0]
	cleared := c.push(q, task("gone: cleared"))[0]
	c.complete(c.receive(q, c.longVis(q)))
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != running {
		c.Fatalf("received %s; want %s, pushed second", e.Task.ID, running)
	}
	var held string
	if level(q, driver.Dependencies) == driver.Native {
		held = c.push(q, &jobq.Task{Command: "echo conformance held", After: []string{cleared}})[0]
	}
	never := "0123456789abcdef0123456789abcdef"
	ids := []string{done, running, cleared, never}
	if held != "" {
		ids = append(ids, held)
	}
	gone, early, ok, err := hooks.GoneTasks(c.ctx(), q, ids, time.Time{}, nil)
	if level(q, driver.Dependencies) != driver.Native {
		if err != nil || ok || gone != nil || early != nil {
			c.Errorf("GoneTasks on a backend that cannot look tasks up by ID = %v, %v, %v; want nil, false, nil", gone, ok, err)
		}
		c.complete(e)
		return
	}
	if err != nil || !ok || !slices.Equal(gone, []string{never}) || early != nil {
		c.Errorf("GoneTasks of ended, running, queued, held and unknown tasks = %v, %v, %v, %v; want [%s], none early, true, nil", gone, early, ok, err, never)
	}
	c.complete(e)
	if _, err := q.Admin().Clear(c.ctx()); err != nil {
		c.Fatalf("clear: %v", err)
	}
	c.goneAfterClear(q, ids, []string{cleared, never}, []string{done, running})
	ctx, cancel := context.WithTimeout(c.ctx(), 300*time.Millisecond)
	defer cancel()
	_, err = q.Wait(ctx, cleared)
	c.expectCode(err, errcode.DeadlineExceeded, "a wait for a cleared task (one may yet be pushed with its ID)")
}

// goneAfterClear checks GoneTasks of ids after a clear: wantGone are gone;
// none ended early, except, for a wait that counts ends from an hour ahead
// (a worker's clock behind the waiter's), wantEarly.
func (c *C) goneAfterClear(q *handle, ids, wantGone, wantEarly []string) {
	c.Helper()
	if gone, early, ok, err := hooks.GoneTasks(c.ctx(), q, ids, time.Time{}, nil); err != nil || !ok || !slices.Equal(gone, wantGone) || early != nil {
		c.Errorf("GoneTasks after a clear = %v, %v, %v, %v; want %v, none early, true, nil (the held task stays held)", gone, early, ok, err, wantGone)
	}
	later := time.Now().Add(time.Hour)
	if gone, early, ok, err := hooks.GoneTasks(c.ctx(), q, ids, later, nil); err != nil || !ok || !slices.Equal(gone, wantGone) || !slices.Equal(early, wantEarly) {
		c.Errorf("GoneTasks since an hour ahead = %v, %v, %v, %v; want %v, early %v, true, nil", gone, early, ok, err, wantGone, wantEarly)
	}
}

// A waitReport is a result WaitFunc reported, or, once it returned, its
// error.
type waitReport struct {
	r   *jobq.Result
	err error
}

// waitReports are the reports of a WaitFunc that runs in the background.
type waitReports struct {
	c    *C
	got  chan waitReport
	seen map[string]driver.ResultState // the state reported of each task
}

// waitFunc runs q.WaitFunc for ids in the background.
func (c *C) waitFunc(q *handle, ids []string) *waitReports {
	w := &waitReports{c: c, got: make(chan waitReport, len(ids)+1), seen: map[string]driver.ResultState{}}
	go func() {
		err := q.WaitFunc(c.ctx(), ids, jobq.WaitOptions{}, func(r *jobq.Result) error {
			w.got <- waitReport{r: r}
			return nil
		})
		w.got <- waitReport{err: err}
	}()
	return w
}

// next is the next result reported, which must come within the suite's
// patience; why says what should make it come.
func (w *waitReports) next(why string) waitReport {
	c := w.c
	c.Helper()
	select {
	case rep := <-w.got:
		if rep.err != nil {
			c.Fatalf("WaitFunc: %v", rep.err)
		}
		if rep.r == nil {
			c.Fatalf("WaitFunc returned while %s", why)
		}
		w.seen[rep.r.ID] = rep.r.State
		return rep
	case <-time.After(c.patience()):
		c.Fatalf("WaitFunc reported nothing within %v while %s", c.patience(), why)
	}
	return waitReport{}
}

// needCancel returns when the backend can cancel; where it cannot, it
// checks that Cancel is Unimplemented and skips the check.
func (c *C) needCancel(q *handle) {
	c.Helper()
	if level(q, driver.Results) != driver.Unsupported && level(q, driver.Cancel) != driver.Unsupported {
		return
	}
	_, err := q.Admin().Cancel(c.ctx(), "no-such-task")
	c.expectCode(err, errcode.Unimplemented, "Cancel on a backend that cannot cancel")
	why := "cancel is unsupported: " + q.Capabilities().Features[driver.Cancel].Fallback
	if level(q, driver.Results) == driver.Unsupported {
		why = "results are unsupported, and a cancel is recorded in a result record"
	}
	c.skipNeeds("driver.ResultStore with feature cancel (driver.TaskRemover where cancel is native)", why)
}

// expectCancel checks one CancelResult.
func (c *C) expectCancel(got []jobq.CancelResult, err error, id string, want jobq.CancelOutcome) {
	c.Helper()
	if err != nil {
		c.Fatalf("cancel %s: %v", id, err)
	}
	if len(got) != 1 || got[0].ID != id || got[0].Outcome != want {
		c.Fatalf("cancel %s = %+v; want outcome %s", id, got, want)
	}
}

// checkCancelQueued: a queued task is removed and recorded as cancelled
// where the backend can remove by ID; elsewhere the receiver sees the
// cancel and settles it as cancelled. A task that ended is not changed.
func checkCancelQueued(c *C) {
	q := c.open()
	c.needCancel(q)
	done := c.push(q, task("cancel too late"))[0]
	c.complete(c.receive(q, c.longVis(q)))
	c.result(q, done)
	rs, err := q.Admin().Cancel(c.ctx(), done)
	c.expectCancel(rs, err, done, jobq.CancelTooLate)
	if r := c.result(q, done); r.State != driver.ResultSucceeded {
		c.Errorf("a cancel after the end changed the record to %s", r.State)
	}

	id := c.push(q, task("cancel queued"))[0]
	rs, err = q.Admin().Cancel(c.ctx(), id)
	if level(q, driver.Cancel) == driver.Native {
		c.expectCancel(rs, err, id, jobq.CancelRemoved)
		if r := c.result(q, id); r.State != driver.ResultCancelled {
			c.Errorf("a removed task's record is in state %s; want cancelled", r.State)
		}
		c.receiveNone(q, time.Time{}, "the only queued task was cancelled")
		c.expectStats(q, want{})
		return
	}
	c.expectCancel(rs, err, id, jobq.CancelPending)
	c.settleCancelled(q, c.receive(q, c.longVis(q)), id)
}

// settleCancelled does what a worker does with a task whose cancel was
// asked for: it sees the request and settles the task as cancelled.
func (c *C) settleCancelled(q *handle, e *jobq.Envelope, id string) {
	c.Helper()
	if e.Task.ID != id {
		c.Fatalf("received %s; want the cancelled task %s", e.Task.ID, id)
	}
	asked, err := hooks.CancelRequested(c.ctx(), q, []string{"conformance-other", id})
	if err != nil || len(asked) != 1 || asked[0] != id {
		c.Errorf("CancelRequested = %v, %v; want [%s]", asked, err, id)
	}
	if ok, err := hooks.EnvelopeCancelRequested(c.ctx(), e); err != nil || !ok {
		c.Errorf("Envelope.CancelRequested = %v, %v; want true", ok, err)
	}
	if r := c.result(q, id); r.State != driver.ResultCancelRequested {
		c.Errorf("the record of a task asked to cancel is in state %s; want %s", r.State, driver.ResultCancelRequested)
	}
	if err := e.Cancel(c.ctx(), "cancel requested"); err != nil {
		c.Fatalf("settle the cancelled task: %v", err)
	}
	if r := c.result(q, id); r.State != driver.ResultCancelled {
		c.Errorf("after the worker stopped it, the record is in state %s; want cancelled", r.State)
	}
	if asked, err := hooks.CancelRequested(c.ctx(), q, []string{id}); err != nil || len(asked) != 0 {
		c.Errorf("CancelRequested after the cancel was settled = %v, %v; want none", asked, err)
	}
	c.receiveNone(q, time.Time{}, "a cancelled task is not retried")
}

// checkCancelDelayed: a task waiting for its NotBefore is removed as a
// queued one is.
func checkCancelDelayed(c *C) {
	q := c.open()
	c.needCancel(q)
	if level(q, driver.DelayedPush) != driver.Native {
		c.Skipf("delayed push is %s, so no task can wait delayed", level(q, driver.DelayedPush))
	}
	t := task("cancel delayed")
	t.NotBefore = time.Now().Add(time.Hour)
	id := c.push(q, t)[0]
	rs, err := q.Admin().Cancel(c.ctx(), id)
	if level(q, driver.Cancel) == driver.Native {
		c.expectCancel(rs, err, id, jobq.CancelRemoved)
		if r := c.result(q, id); r.State != driver.ResultCancelled {
			c.Errorf("a removed delayed task's record is in state %s; want cancelled", r.State)
		}
		c.expectStats(q, want{})
		return
	}
	c.expectCancel(rs, err, id, jobq.CancelPending)
	if r := c.result(q, id); r.State != driver.ResultCancelRequested {
		c.Errorf("the record of a delayed task asked to cancel is in state %s; want %s", r.State, driver.ResultCancelRequested)
	}
}

// checkCancelRunning: a running task cannot be removed; its holder sees
// the request (as the worker polls for it) and settles it as cancelled,
// and it is not retried. Package worker's tests check that a worker stops
// the process.
func checkCancelRunning(c *C) {
	q := c.open()
	c.needCancel(q)
	t := task("cancel running")
	t.NumRetries = 3
	id := c.push(q, t)[0]
	e := c.receive(q, c.longVis(q))
	rs, err := q.Admin().Cancel(c.ctx(), id)
	c.expectCancel(rs, err, id, jobq.CancelPending)
	// Asking again changes nothing.
	rs, err = q.Admin().Cancel(c.ctx(), id, id)
	if err != nil || len(rs) != 2 || rs[0].Outcome != jobq.CancelPending || rs[1].Outcome != jobq.CancelPending {
		c.Errorf("a second cancel of the running task = %+v, %v; want pending twice", rs, err)
	}
	c.settleCancelled(q, e, id)
}

// checkRetryBackoff: a failed task's retry waits for its backoff, counted
// as delayed meanwhile, then comes back; where the backend cannot delay a
// requeue it comes back at once.
func checkRetryBackoff(c *C) {
	q := c.open()
	t := task("retry backoff")
	t.NumRetries = 1
	t.RetryBackoff = jobq.Backoff{Base: 3 * c.vis(), Cap: 3 * c.vis()}
	id := c.push(q, t)[0]
	e := c.receive(q, c.longVis(q))
	hooks.RecordAttempt(e, jobq.Attempt{Worker: "conformance-worker", Outcome: jobq.OutcomeFailure})
	res, err := e.Fail(c.ctx(), errors.New("conformance failure"), "")
	failed := time.Now()
	if err != nil || !res.Retried {
		c.Fatalf("Fail = %+v, %v; want a retry", res, err)
	}
	switch level(q, driver.DelayedRequeue) {
	case driver.Unsupported:
		if res.Delay != 0 {
			c.Errorf("delayed requeue is unsupported, yet Fail reports a delay of %v", res.Delay)
		}
		if n := len(q.logs.warnings(string(driver.DelayedRequeue))); n != 1 {
			c.Errorf("retrying without a delayed requeue logged %d warnings, want 1", n)
		}
	case driver.Emulated:
		c.Logf("delayed requeue is emulated (%s): the retry came after %v", q.Capabilities().Features[driver.DelayedRequeue].Fallback, res.Delay)
	default:
		if res.Delay < t.RetryBackoff.Base/2 || res.Delay > t.RetryBackoff.Cap {
			c.Errorf("Fail reports a delay of %v; want %v..%v (the task's backoff with jitter)", res.Delay, t.RetryBackoff.Base/2, t.RetryBackoff.Cap)
		}
		due := failed.Add(res.Delay)
		c.receiveNone(q, due, fmt.Sprintf("the retry waits for its backoff of %v", res.Delay))
		if st, err := q.Admin().Stats(c.ctx()); err != nil {
			c.Errorf("stats: %v", err)
		} else if level(q, driver.ExactCount) == driver.Native && st.Known.Delayed && time.Now().Before(due) && st.Delayed != 1 {
			c.Errorf("stats while the retry waits: %+v; want Delayed 1", st)
		}
	}
	e = c.receive(q, c.longVis(q))
	if early := time.Until(failed.Add(res.Delay)); level(q, driver.DelayedRequeue) == driver.Native && early > c.tolerance() {
		c.Errorf("the retry came %v before its backoff ended", early)
	}
	c.expectDelivery(e, id, 2, "after the retry backoff")
	if as := e.Attempts(); level(q, driver.InPlaceUpdate) == driver.Native && res.Delay > 0 && (len(as) == 0 || as[0].RetryDelay == 0) {
		c.Errorf("the attempt history %+v does not record the retry delay %v", as, res.Delay)
	}
	c.complete(e)
}

// checkTaskSettingsRoundTrip: a task's retry backoff and time limit reach
// the receiver unchanged (the worker applies the time limit; package
// worker's tests check that).
func checkTaskSettingsRoundTrip(c *C) {
	q := c.open()
	t := task("settings")
	t.RetryBackoff = jobq.Backoff{Base: 1500 * time.Millisecond, Cap: 2 * time.Hour}
	t.TimeLimit = 90 * time.Minute
	c.push(q, t)
	e := c.receive(q, c.longVis(q))
	if e.Task.RetryBackoff != t.RetryBackoff || e.Task.TimeLimit != t.TimeLimit {
		c.Errorf("received retry backoff %v and time limit %v; want %v and %v", e.Task.RetryBackoff, e.Task.TimeLimit, t.RetryBackoff, t.TimeLimit)
	}
	c.complete(e)
}

// checkResultsPolicy: the results policy picks what a task's end keeps,
// on every backend that keeps records and policies. Under all (and with
// no policy) a success keeps the last 1 KiB of its output and a failure
// its full tail; under failed a success keeps a bare record (state, no
// output) and a failure its full one; under none nothing is kept, and
// Result and Wait fail with FailedPrecondition naming the policy.
func checkResultsPolicy(c *C) {
	probe := c.open()
	c.needResults(probe)
	c.needPolicyStore(probe, "the results policy")
	dead := level(probe, driver.DeadLetter) != driver.Unsupported
	output := strings.Repeat("0123456789abcdef", 256) // 4 KiB
	for _, mode := range []string{"", "all", "failed", "none"} {
		q := c.open()
		c.setResultsPolicy(q, mode)
		ok, failed := c.endUnderPolicy(q, output, dead)
		if mode == "none" {
			c.expectNoRecords(q, ok)
			continue
		}
		c.expectKept(q, mode, ok, failed, output)
	}
}

// setResultsPolicy sets the results policy mode on q ("" leaves none).
func (c *C) setResultsPolicy(q *handle, mode string) {
	if mode == "" {
		return
	}
	p, err := hooks.ParsePolicy("results", mode)
	if err != nil {
		c.Fatalf("parse results %s: %v", mode, err)
	}
	if err := q.Admin().SetPolicy(c.ctx(), p); err != nil {
		c.Fatalf("policy set results %s: %v", mode, err)
	}
}

// endUnderPolicy runs a task that succeeds and, where there are dead
// letters, one that is dead-lettered, each with output; it returns their
// IDs ("" for the failure where there is none).
func (c *C) endUnderPolicy(q *handle, output string, dead bool) (ok, failed string) {
	ok = c.push(q, task("results policy: success"))[0]
	e := c.receive(q, c.longVis(q))
	e.SetResult(jobq.ResultDetails{Output: output})
	c.complete(e)
	if !dead {
		return ok, ""
	}
	failed = c.push(q, task("results policy: failure"))[0]
	e = c.receive(q, c.longVis(q))
	e.SetResult(jobq.ResultDetails{Output: output})
	if err := e.DeadLetter(c.ctx(), "failed on purpose", ""); err != nil {
		c.Fatalf("dead-letter: %v", err)
	}
	return ok, failed
}

// expectNoRecords: under results none, Result and Wait fail with
// FailedPrecondition, saying how to keep records.
func (c *C) expectNoRecords(q *handle, id string) {
	_, err := q.Result(c.ctx(), id)
	c.expectCode(err, errcode.FailedPrecondition, "Result under results none")
	_, err = q.Wait(c.ctx(), id)
	c.expectCode(err, errcode.FailedPrecondition, "Wait under results none")
	if err != nil && !strings.Contains(err.Error(), "policy set results all") {
		c.Errorf("Wait under results none: %v; want the error to say how to keep records", err)
	}
}

// expectKept: under mode, the success keeps its last 1 KiB of output (none
// under failed) and Wait answers for it; the failure keeps its whole tail.
func (c *C) expectKept(q *handle, mode, ok, failed, output string) {
	// A cut tail carries a short note saying so.
	r := c.result(q, ok)
	switch {
	case r.State != driver.ResultSucceeded:
		c.Errorf("results %q: the success's record is %s", mode, r.State)
	case mode == "failed" && r.Output != "":
		c.Errorf("results failed: the success's record kept %d bytes of output; want none", len(r.Output))
	case mode != "failed" && (!strings.Contains(r.Output, output[len(output)-1000:]) || len(r.Output) > 1024+64):
		c.Errorf("results %q: the success's record kept %d bytes of output; want its last 1 KiB", mode, len(r.Output))
	}
	if rs, err := q.Wait(c.ctx(), ok); err != nil || rs[0].State != driver.ResultSucceeded {
		c.Errorf("results %q: Wait for a success = %v, %v", mode, rs, err)
	}
	if failed != "" {
		if r := c.result(q, failed); r.State != driver.ResultDeadLettered || r.Output != output {
			c.Errorf("results %q: the failure's record is %s with %d bytes of output; want dead-lettered with all %d", mode, r.State, len(r.Output), len(output))
		}
	}
}
