package confsuite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/wire"
)

// removalFault is how the CancelInterrupted check cuts a cancel short at
// the driver's RemoveTasks.
type removalFault int

const (
	// removalNotMade: the process dies (or the engine is unreachable)
	// before the removal, which would have stored the records.
	removalNotMade removalFault = iota
	// removalAnswerLost: the removal is applied, then its answer is lost
	// (a dropped connection, a process that dies on receipt).
	removalAnswerLost
)

func (f removalFault) String() string {
	if f == removalNotMade {
		return "removal not made"
	}
	return "removal's answer lost"
}

// faultyRemover is the backend's own driver with RemoveTasks cut short by
// fault. It keeps only the interfaces a cancel needs: Driver, ResultStore
// and TaskRemover (the portable layer polls for results without a
// ResultWaiter).
type faultyRemover struct {
	driver.Driver
	driver.ResultStore
	remover driver.TaskRemover
	fault   removalFault
}

// RemoveTasks fails as f.fault says, after the real removal when its answer
// is to be lost.
func (f faultyRemover) RemoveTasks(ctx context.Context, cancelled, requested []*driver.ResultRecord) ([]string, []string, error) {
	if f.fault == removalAnswerLost {
		if _, _, err := f.remover.RemoveTasks(ctx, cancelled, requested); err != nil {
			return nil, nil, err
		}
	}
	return nil, nil, driver.Errorf(errcode.Unavailable, "conformance: RemoveTasks cut short (%s)", f.fault)
}

// faultyOpener opens a queue through the backend's registered opener and
// wraps its driver in a faultyRemover.
type faultyOpener struct {
	inner driver.Opener
	fault removalFault
}

func (o faultyOpener) Capabilities() driver.Capabilities { return o.inner.Capabilities() }

func (o faultyOpener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	d, err := o.inner.Open(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	return cutRemoval(d, o.fault)
}

// cutRemoval wraps d in a faultyRemover.
func cutRemoval(d driver.Driver, fault removalFault) (driver.Driver, error) {
	rs, isStore := d.(driver.ResultStore)
	tr, isRemover := d.(driver.TaskRemover)
	if !isStore || !isRemover {
		_ = d.Close()
		return nil, fmt.Errorf("the driver declares cancel native, so it must implement driver.ResultStore (%v) and driver.TaskRemover (%v)", isStore, isRemover)
	}
	return faultyRemover{Driver: d, ResultStore: rs, remover: tr, fault: fault}, nil
}

// openFaulty opens rawURL, a queue of the backend under test, with its
// RemoveTasks cut short by fault, and closes it when the check ends.
func (c *C) openFaulty(rawURL string, fault removalFault) *jobq.Queue {
	c.Helper()
	if c.h.byDriver() {
		d, err := c.h.NewDriver(c.ctx(), rawURL)
		if err != nil {
			c.Fatalf("Harness.NewDriver(%q): %v", rawURL, err)
		}
		fd, err := cutRemoval(d, fault)
		if err != nil {
			c.Fatalf("%v", err)
		}
		q, err := jobq.New(fd, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			c.Fatalf("a queue with a faulty RemoveTasks: %v", err)
		}
		c.Cleanup(func() { _ = q.Close() })
		return q
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		c.Fatalf("parse %s: %v", redact.URL(rawURL), err)
	}
	inner, ok := jobq.DefaultURLMux().Opener(u.Scheme)
	if !ok {
		c.Fatalf("no backend is registered for scheme %q", u.Scheme)
	}
	mux := new(jobq.URLMux)
	if err := mux.Register(u.Scheme, faultyOpener{inner: inner, fault: fault}); err != nil {
		c.Fatalf("registering the faulty opener: %v", err)
	}
	q, err := mux.Open(c.ctx(), rawURL, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		c.Fatalf("open %s with a faulty RemoveTasks: %v", redact.URL(rawURL), err)
	}
	c.Cleanup(func() { _ = q.Close() })
	return q
}

// checkCancelInterrupted: a cancel cut short at the removal leaves a
// definite state, nothing to hang on, and a second cancel says what it
// is. The removal stores its records with it (driver.TaskRemover), so:
// when it was not made, a queued task is still queued with no record, and
// cancelling again removes it; when it was made but its answer was lost,
// a queued task has ended (cancelled: a second cancel is too late), a
// running one has its cancel request (a second cancel says requested, and
// its worker stops it), and an ID that no task has has no record (a
// second cancel says not found).
func checkCancelInterrupted(c *C) {
	rawURL := c.newQueue()
	q := c.openQueue(rawURL)
	c.needCancel(q)
	if level(q, driver.Cancel) != driver.Native {
		c.Skipf("cancel is %s: no task is removed by ID", level(q, driver.Cancel))
	}
	for _, fault := range []removalFault{removalNotMade, removalAnswerLost} {
		faulty := c.openFaulty(rawURL, fault)
		id := c.push(q, task("cancel interrupted: "+fault.String()))[0]
		_, err := faulty.Admin().Cancel(c.ctx(), id)
		c.expectCode(err, errcode.Unavailable, fault.String()+": Cancel")
		// The record as the interrupted cancel left it, and what
		// cancelling again does.
		again := jobq.CancelRemoved
		if fault == removalAnswerLost {
			again = jobq.CancelTooLate
			if r := c.result(q, id); r.State != driver.ResultCancelled {
				c.Errorf("%s: the task's record is in state %s; want %s", fault, r.State, driver.ResultCancelled)
			}
		} else if r, err := q.Result(c.ctx(), id); err == nil {
			c.Errorf("%s: the queued task has a record in state %s; want none", fault, r.State)
		}
		rs, err := q.Admin().Cancel(c.ctx(), id)
		c.expectCancel(rs, err, id, again)
		if rs[0].State != driver.ResultCancelled {
			c.Errorf("%s: cancelling again reports state %s; want cancelled", fault, rs[0].State)
		}
		ctx, cancel := context.WithTimeout(c.ctx(), c.patience())
		res, err := q.Wait(ctx, id)
		cancel()
		if err != nil || len(res) != 1 || res[0].State != driver.ResultCancelled {
			c.Errorf("%s: Wait = %v, %v; want the cancelled record", fault, res, err)
		}
	}
	c.receiveNone(q, time.Time{}, "both cancelled tasks were removed")
	c.expectStats(q, want{})

	lost := c.openFaulty(rawURL, removalAnswerLost)
	absent, err := wire.TaskID(task("cancel interrupted: never pushed"))
	if err != nil {
		c.Fatalf("task ID: %v", err)
	}
	_, err = lost.Admin().Cancel(c.ctx(), absent)
	c.expectCode(err, errcode.Unavailable, "an unknown ID, answer lost: Cancel")
	_, err = q.Result(c.ctx(), absent)
	c.expectCode(err, errcode.NotFound, "an unknown ID, answer lost: Result (nothing is recorded)")
	rs, err := q.Admin().Cancel(c.ctx(), absent)
	c.expectCancel(rs, err, absent, jobq.CancelNotFound)

	id := c.push(q, task("cancel interrupted: running"))[0]
	e := c.receive(q, c.longVis(q))
	_, err = lost.Admin().Cancel(c.ctx(), id)
	c.expectCode(err, errcode.Unavailable, "a running task, answer lost: Cancel")
	rs, err = q.Admin().Cancel(c.ctx(), id)
	c.expectCancel(rs, err, id, jobq.CancelPending)
	c.settleCancelled(q, e, id)
}

// checkCancelBeforePush: a cancel of an ID that no message has. Where the
// backend removes queued tasks by ID it can look the ID up: the cancel is
// not found and records nothing, so Result stays NotFound and a task
// pushed with that ID later runs normally. Elsewhere it cannot tell: the
// cancel says requested and records the request in case the task
// arrives, so Result says cancel-requested (not an end) and the receiver
// of a task pushed with that ID later sees it as cancelled. Either way
// Wait does not return before the task is pushed.
func checkCancelBeforePush(c *C) {
	q := c.open()
	c.needCancel(q)
	t := task("cancel before push")
	id, err := wire.TaskID(t)
	if err != nil {
		c.Fatalf("task ID: %v", err)
	}
	native := level(q, driver.Cancel) == driver.Native
	rs, err := q.Admin().Cancel(c.ctx(), id)
	if native {
		c.expectCancel(rs, err, id, jobq.CancelNotFound)
		if rs[0].State != "" {
			c.Errorf("the cancel of an unknown ID reports state %s; want none (nothing recorded)", rs[0].State)
		}
		_, err := q.Result(c.ctx(), id)
		c.expectCode(err, errcode.NotFound, "Result of an unknown ID after its cancel was not found (nothing is recorded)")
	} else {
		c.expectCancel(rs, err, id, jobq.CancelPending)
		if rs[0].State != driver.ResultCancelRequested {
			c.Errorf("the cancel of an unknown ID reports state %s; want %s", rs[0].State, driver.ResultCancelRequested)
		}
		if r := c.result(q, id); r.State != driver.ResultCancelRequested || r.State.Final() {
			c.Errorf("the record of an unknown ID asked to cancel is in state %s; want %s, not an end", r.State, driver.ResultCancelRequested)
		}
	}
	ctx, cancel := context.WithTimeout(c.ctx(), 300*time.Millisecond)
	res, err := q.Wait(ctx, id)
	cancel()
	c.expectCode(err, errcode.DeadlineExceeded, fmt.Sprintf("Wait on an ID that no task has yet (returned %v)", res))
	if got := c.push(q, t)[0]; got != id {
		c.Fatalf("pushed task %s; want %s", got, id)
	}
	e := c.receive(q, c.longVis(q))
	if !native {
		c.settleCancelled(q, e, id)
		return
	}
	if e.Task.ID != id {
		c.Fatalf("received %s; want %s", e.Task.ID, id)
	}
	if ok, err := hooks.EnvelopeCancelRequested(c.ctx(), e); err != nil || ok {
		c.Errorf("Envelope.CancelRequested of a task pushed after its cancel was not found = %v, %v; want false", ok, err)
	}
	c.complete(e)
	if r := c.result(q, id); r.State != driver.ResultSucceeded {
		c.Errorf("the task pushed after its cancel was not found ended %s; want succeeded", r.State)
	}
}

// checkDeadLetterRequeueRecord: a dead letter requeued has not ended: its
// record is gone until the new run ends, so Result is NotFound and Wait
// waits; where messages are updated in place its delivery count and
// attempt history go on from the dead letter's, and the new record counts
// every delivery and lists the old failure and the new attempt.
func checkDeadLetterRequeueRecord(c *C) {
	q := c.open()
	c.needResults(q)
	if level(q, driver.DeadLetter) == driver.Unsupported {
		c.Skipf("dead-letter is unsupported")
	}
	if level(q, driver.Results) != driver.Native {
		c.Skipf("results are %s: kept apart from the dead letters", level(q, driver.Results))
	}
	id := c.push(q, task("dead-letter requeue record"))[0]
	e := c.receive(q, c.longVis(q))
	hooks.RecordAttempt(e, jobq.Attempt{Worker: "conformance-worker", Outcome: jobq.OutcomeFailure, Detail: "first run"})
	if res, err := e.Fail(c.ctx(), errors.New("conformance failure"), "first run's output"); err != nil || res.Retried {
		c.Fatalf("Fail = %+v, %v; want dead-lettered", res, err)
	}
	if r := c.result(q, id); r.State != driver.ResultDeadLettered {
		c.Fatalf("the record after the failure is in state %s; want dead-lettered", r.State)
	}
	dead := c.listDead(q, 1)
	if n, err := q.Admin().RequeueDeadLetters(c.ctx(), dead[0].MessageID); err != nil || n != 1 {
		c.Fatalf("requeue the dead letter = %d, %v; want 1", n, err)
	}
	_, err := q.Result(c.ctx(), id)
	c.expectCode(err, errcode.NotFound, "Result of a requeued dead letter (it has not ended)")
	ctx, cancel := context.WithTimeout(c.ctx(), 300*time.Millisecond)
	res, err := q.Wait(ctx, id)
	cancel()
	c.expectCode(err, errcode.DeadlineExceeded, fmt.Sprintf("Wait on a requeued dead letter (returned %v)", res))

	e = c.receive(q, c.longVis(q))
	inPlace := level(q, driver.InPlaceUpdate) == driver.Native
	if inPlace {
		c.expectDelivery(e, id, 2, "after the dead letter was requeued")
	}
	hooks.RecordAttempt(e, jobq.Attempt{Worker: "conformance-worker", Outcome: jobq.OutcomeSuccess})
	c.complete(e)
	r := c.result(q, id)
	if r.State != driver.ResultSucceeded {
		c.Fatalf("the record of the new run is in state %s; want succeeded", r.State)
	}
	if !inPlace {
		return
	}
	var outcomes []string
	for _, a := range r.Attempts {
		outcomes = append(outcomes, fmt.Sprintf("%d:%s", a.Delivery, a.Outcome))
	}
	if r.DeliveryCount != 2 || strings.Join(outcomes, " ") != "1:failure 2:success" {
		c.Errorf("the new run's record counts %d deliveries, attempts %v; want 2, [1:failure 2:success]", r.DeliveryCount, outcomes)
	}
}
