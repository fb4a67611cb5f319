// Package confsuite holds jobq's shared backend checks without the testing
// package, so that the jobq binary can run them (`jobq QUEUE conformance`,
// through RunLive) without linking testing. Backends' tests run the same
// checks through the public package conformance, whose Run adapts
// *testing.T to T.
package confsuite

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// T is the part of *testing.T the checks use. *testing.T implements it; so
// does the runner behind RunLive. Fatalf and Skipf end the calling goroutine,
// which must be the one running the check.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Failed() bool
	Cleanup(func())
	// Context is canceled when the check ends (before its clean-ups run).
	Context() context.Context
}

// check is one behaviour the suite verifies.
type check struct {
	name string
	run  func(c *C)
}

// C is the state of one running check.
type C struct {
	T
	h Harness
	// newQueue returns a fresh queue: its URL, or its name when the
	// harness opens queues as driver values (Harness.NewDriver).
	newQueue func() string
	// newURL returns a fresh queue URL; nil when the harness has none.
	newURL func() string
}

// Check is one check of the suite, for runners.
type Check struct {
	// Name is the check's name (its subtest name).
	Name string
	// Run runs the check; it ends the calling goroutine through T's Fatalf
	// or Skipf, as testing does.
	Run func(c *C)
}

// Checks returns the suite's checks in the order they run.
func Checks() []Check {
	cs := checks()
	out := make([]Check, len(cs))
	for i, ck := range cs {
		out[i] = Check{Name: ck.name, Run: ck.run}
	}
	return out
}

// NewC returns the state of one check run on t against the backend h;
// newURL returns a fresh, empty queue URL each time it is called. With
// h.NewDriver set the checks open queues as driver values under fresh
// names (QueueName), and newURL, which may then be nil, serves only the
// UnknownParameter check.
func NewC(t T, h Harness, newURL func() string) *C {
	c := &C{T: t, h: h, newQueue: newURL, newURL: newURL}
	if h.byDriver() {
		c.newQueue = QueueName
	}
	return c
}

// Names returns the names of the checks in the order they run.
func Names() []string {
	cs := checks()
	out := make([]string, len(cs))
	for i, ck := range cs {
		out[i] = ck.name
	}
	return out
}

// checks lists the suite. Keep docs/conformance.md in step.
func checks() []check {
	return append([]check{
		{"Capabilities", checkCapabilities},
		{"As", checkAs},
		{"UnknownParameter", checkUnknownParameter},
		{"PushReceiveComplete", checkPushReceiveComplete},
		{"BatchPushReceive", checkBatchPushReceive},
		{"BatchLimits", checkBatchLimits},
		{"Unicode", checkUnicode},
		{"SizeLimit", checkSizeLimit},
		{"Stash", checkStash},
		{"VisibilityExpiry", checkVisibilityExpiry},
		{"Renew", checkRenew},
		{"LockLostChannel", checkLockLostChannel},
		{"SettleAfterLockLost", checkSettleAfterLockLost},
		{"RequeueImmediate", checkRequeueImmediate},
		{"RequeueDelayed", checkRequeueDelayed},
		{"Snooze", checkSnooze},
		{"DelayedPush", checkDelayedPush},
		{"Priority", checkPriority},
		{"DeadLetter", checkDeadLetter},
		{"DeadLetterRequeuePurge", checkDeadLetterRequeuePurge},
		{"RequeueDeadOfQueuedID", checkRequeueDeadOfQueuedID},
		{"FailRetryBudget", checkFailRetryBudget},
		{"Poison", checkPoison},
		{"CorruptRecord", checkCorruptRecord},
		{"Peek", checkPeek},
		{"Stats", checkStats},
		{"Clear", checkClear},
		{"Dedup", checkDedup},
		{"ConcurrentReceivers", checkConcurrentReceivers},
		{"DegradedWarnsOnce", checkDegradedWarnsOnce},
		{"UnimplementedUnsafe", checkUnimplementedUnsafe},
		{"ClosedQueue", checkClosedQueue},
		{"SettleWithRecords", checkSettleWithRecords},
		{"CanceledContext", checkCanceledContext},
		{"Pause", checkPause},
		{"BulkCancelByFilter", checkBulkCancelByFilter},
		{"BulkRequeueByFilter", checkBulkRequeueByFilter},
		{"PurgeRecordsByFilter", checkPurgeRecordsByFilter},
		{"Schedules", checkSchedules},
		{"HeldStore", checkHeldStore},
	}, append(append(append(append(policyChecks(), resultChecks()...), append(workerChecks(), historyChecks()...)...), groupChecks()...), dependencyChecks()...)...)
}

// handle is one open queue and the log records of its logger.
type handle struct {
	*jobq.Queue
	// ref names the queue: its URL, or its name for Harness.NewDriver.
	ref  string
	logs *logStore
}

// open opens a fresh queue.
func (c *C) open() *handle {
	c.Helper()
	return c.openQueue(c.newQueue())
}

// openWith opens the queue ref (from newQueue) with opts: by URL, or as a
// driver value from Harness.NewDriver.
func (c *C) openWith(ref string, opts jobq.Options) (*jobq.Queue, error) {
	if !c.h.byDriver() {
		return jobq.OpenWithOptions(c.Context(), ref, opts)
	}
	d, err := c.h.NewDriver(c.Context(), ref)
	if err != nil {
		return nil, fmt.Errorf("Harness.NewDriver(%q): %w", ref, err)
	}
	if d == nil {
		return nil, fmt.Errorf("Harness.NewDriver(%q) returned a nil driver and no error", ref)
	}
	return jobq.New(d, opts)
}

// openQueue opens ref with a capturing logger and closes it when the check
// ends, verifying then that no feature warned more than once and that no
// native feature warned at all.
func (c *C) openQueue(ref string) *handle {
	c.Helper()
	logs := &logStore{}
	q, err := c.openWith(ref, jobq.Options{Logger: slog.New(&captureHandler{store: logs})})
	if err != nil {
		c.Fatalf("open %s: %v", redact.URL(ref), err)
	}
	h := &handle{Queue: q, ref: ref, logs: logs}
	c.Cleanup(func() {
		_ = q.Close()
		caps := q.Capabilities()
		for _, f := range driver.AllFeatures {
			ws := logs.warnings(string(f))
			switch {
			case len(ws) > 1:
				c.Errorf("feature %s warned %d times on one queue; the degradation warning must be logged once per queue: %v", f, len(ws), ws)
			case len(ws) == 1 && caps.Level(f) == driver.Native:
				c.Errorf("feature %s is declared native but a degradation warning was logged: %v", f, ws[0])
			}
		}
	})
	return h
}

// pushRaw stores body unchanged as one message on q's queue: through
// Harness.PushRaw, or else, for a harness of driver values, through a
// driver of its own. It reports false when the harness offers neither.
func (c *C) pushRaw(q *handle, body []byte) (bool, error) {
	if c.h.PushRaw != nil {
		return true, c.h.PushRaw(c.ctx(), q.ref, body)
	}
	if !c.h.byDriver() {
		return false, nil
	}
	d, err := c.h.NewDriver(c.ctx(), q.ref)
	if err != nil {
		return true, fmt.Errorf("Harness.NewDriver(%q): %w", q.ref, err)
	}
	defer d.Close()
	_, err = d.Push(c.ctx(), []*driver.Message{{ID: "raw-" + rand.Text(), Body: body}})
	return true, err
}

// canPushRaw reports whether pushRaw can store a raw body.
func (c *C) canPushRaw() bool { return c.h.PushRaw != nil || c.h.byDriver() }

// skipNeeds ends the check as skipped because the backend lacks iface, an
// optional interface of package driver (or the feature it serves); why
// says how the suite knows.
func (c *C) skipNeeds(iface, why string) {
	c.Helper()
	c.Skipf("needs %s: %s", iface, why)
}

// ctx returns a context for one step of a check.
func (c *C) ctx() context.Context { return c.Context() }

func (c *C) vis() time.Duration { return c.h.visibility() }

// patience is how long the suite waits for something that must happen.
func (c *C) patience() time.Duration { return max(10*time.Second, 4*c.vis()) }

// longVis is a lease that does not expire during a check.
func (c *C) longVis(q *handle) time.Duration {
	v := 2 * time.Minute
	if mv := q.Capabilities().MaxVisibility; mv > 0 && mv < v {
		v = mv
	}
	if c.h.Visibility > v {
		v = c.h.Visibility
	}
	return v
}

func level(q *handle, f driver.Feature) driver.Level { return q.Capabilities().Level(f) }

// task returns a distinct shell task.
func task(name string) *jobq.Task {
	return &jobq.Task{Command: "echo conformance " + name}
}

// push pushes tasks one by one and returns their IDs.
func (c *C) push(q *handle, ts ...*jobq.Task) []string {
	c.Helper()
	ids := make([]string, len(ts))
	for i, t := range ts {
		r, err := q.Push(c.ctx(), t)
		if err != nil {
			c.Fatalf("push %q: %v", t.Command, err)
		}
		if r.ID == "" || r.ID != t.ID {
			c.Fatalf("push returned ID %q, task ID is %q: Push must report (and set) the task's ID", r.ID, t.ID)
		}
		ids[i] = r.ID
	}
	return ids
}

// receive waits for one message, failing the check when none arrives.
func (c *C) receive(q *handle, vis time.Duration) *jobq.Envelope {
	c.Helper()
	e, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: vis, Wait: c.patience()})
	if err != nil {
		c.Fatalf("receive (waiting up to %v for a message that was pushed): %v", c.patience(), err)
	}
	return e
}

// expectDelivery checks that e is task id on its n-th delivery; when says
// what led to it, for the error.
func (c *C) expectDelivery(e *jobq.Envelope, id string, n int, when string) {
	c.Helper()
	if e.Task.ID != id || e.DeliveryCount != n {
		c.Errorf("%s: received task %s delivery %d, want %s delivery %d", when, e.Task.ID, e.DeliveryCount, id, n)
	}
}

// receiveNone checks that no message is visible now, reporting why one
// should not be. With a non-zero notAfter (a lease expiry, a NotBefore) the
// check only counts if the Receive call ended before notAfter, since after
// it a message may rightly be returned; then it reports nothing and returns
// false. It returns true when the check counted.
func (c *C) receiveNone(q *handle, notAfter time.Time, why string) bool {
	c.Helper()
	e, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.vis()})
	late := !notAfter.IsZero() && !time.Now().Before(notAfter)
	switch {
	case err == nil && late:
		// Nothing can be concluded; let it go back.
		_ = e.Requeue(c.ctx(), 0)
		return false
	case err == nil:
		c.Errorf("%s, but Receive returned task %s (delivery %d)", why, e.Task.ID, e.DeliveryCount)
		_ = e.Requeue(c.ctx(), 0)
		return true
	case !errors.Is(err, jobq.ErrEmpty):
		c.Fatalf("receive: %v", err)
	}
	return !late
}

// complete completes e, failing the check on error.
func (c *C) complete(e *jobq.Envelope) {
	c.Helper()
	if err := e.Complete(c.ctx()); err != nil {
		c.Fatalf("complete task %s: %v", e.Task.ID, err)
	}
}

// expectCode checks err's code.
func (c *C) expectCode(err error, want errcode.Code, what string) {
	c.Helper()
	if err == nil {
		c.Errorf("%s: got no error, want code %v", what, want)
		return
	}
	if got := errcode.Of(err); got != want {
		c.Errorf("%s: got code %v (%v), want %v", what, got, err, want)
	}
}

// poll calls f every few milliseconds until it returns true or the
// patience runs out; it reports whether f succeeded.
func (c *C) poll(f func() bool) bool {
	deadline := time.Now().Add(c.patience())
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) || c.Context().Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quickRetry is the retry backoff of the suite's tasks that fail for other
// reasons than the backoff's timing: retried almost at once.
var quickRetry = jobq.Backoff{Base: time.Millisecond, Cap: time.Millisecond}
