package confsuite

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// removalFault is how the CancelInterrupted check cuts a cancel short at
// the driver's RemoveTasks.
type removalFault int

const (
	// removalNotMade: the cancel request is stored, then the process dies
	// (or the engine is unreachable) before the removal.
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
// ResultWaiter, and stores records before settlements without a
// ResultSettler).
type faultyRemover struct {
	driver.Driver
	driver.ResultStore
	remover driver.TaskRemover
	fault   removalFault
}

// RemoveTasks fails as f.fault says, after the real removal when its answer
// is to be lost.
func (f faultyRemover) RemoveTasks(ctx context.Context, recs []*driver.ResultRecord) ([]string, error) {
	if f.fault == removalAnswerLost {
		if _, err := f.remover.RemoveTasks(ctx, recs); err != nil {
			return nil, err
		}
	}
	return nil, driver.Errorf(errcode.Unavailable, "conformance: RemoveTasks cut short (%s)", f.fault)
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
	rs, isStore := d.(driver.ResultStore)
	tr, isRemover := d.(driver.TaskRemover)
	if !isStore || !isRemover {
		_ = d.Close()
		return nil, fmt.Errorf("the driver declares cancel native, so it must implement driver.ResultStore (%v) and driver.TaskRemover (%v)", isStore, isRemover)
	}
	return faultyRemover{Driver: d, ResultStore: rs, remover: tr, fault: o.fault}, nil
}

// openFaulty opens rawURL, a queue of the backend under test, with its
// RemoveTasks cut short by fault, and closes it when the check ends.
func (c *C) openFaulty(rawURL string, fault removalFault) *jobq.Queue {
	c.Helper()
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

// checkCancelInterrupted: a cancel cut short at the removal of a queued
// task leaves nothing to hang on. When the removal was not made, the task
// is still queued with its cancel request, and cancelling again removes
// it. When the removal was made but its answer was lost, the task's
// cancelled record was stored with the removal (driver.TaskRemover), so
// the task has ended, without the rest of Cancel. Either way Wait returns
// the cancelled record.
func checkCancelInterrupted(c *C) {
	rawURL := c.newURL()
	q := c.openURL(rawURL)
	if !c.cancels(q) {
		c.Skipf("cancel is unsupported: %s", q.Capabilities().Features[driver.Cancel].Fallback)
	}
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
		left, again := driver.ResultCancelRequested, jobq.CancelRemoved
		if fault == removalAnswerLost {
			left, again = driver.ResultCancelled, jobq.CancelTooLate
		}
		if r := c.result(q, id); r.State != left {
			c.Errorf("%s: the task's record is in state %s; want %s", fault, r.State, left)
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
}
