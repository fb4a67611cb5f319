package confsuite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// tolerance is how early a message may reappear relative to the suite's
// clock, for clock differences between the machine and the engine.
func (c *C) tolerance() time.Duration { return 100*time.Millisecond + c.vis()/10 }

// checkVisibilityExpiry: a received message is hidden until its lease
// expires, then returns with DeliveryCount one higher.
func checkVisibilityExpiry(c *C) {
	q := c.open()
	id := c.push(q, task("visibility"))[0]
	e1 := c.receive(q, c.vis())
	exp := e1.Expiry()
	if !c.receiveNone(q, exp, "the message is leased") {
		c.Logf("the machine was too slow to check hiding within the %v lease", c.vis())
	}
	e2 := c.receive(q, c.longVis(q))
	if early := time.Until(exp); early > c.tolerance() {
		c.Errorf("the message came back %v before its lease expired", early)
	}
	c.expectDelivery(e2, id, 2, "after the lease expired")
	c.complete(e2)
}

// checkRenew: Renew keeps a message hidden past its original deadline. On
// a backend without lease renewal, Renew is Unimplemented and changes
// nothing.
func checkRenew(c *C) {
	q := c.open()
	c.push(q, task("renew"))
	e := c.receive(q, c.vis())
	if level(q, driver.LeaseRenewal) == driver.Unsupported {
		c.expectCode(e.Renew(c.ctx(), 0), errcode.Unimplemented, "Renew on a backend without lease renewal")
		c.complete(e)
		return
	}
	orig := e.Expiry()
	checked := 0
	for time.Now().Before(orig.Add(c.vis())) {
		time.Sleep(c.vis() / 4)
		if !c.renewHeld(e, "renew a held lease") {
			return
		}
		if !e.Expiry().After(orig) {
			c.Errorf("after Renew the lease expires at %v, not after the original %v", e.Expiry(), orig)
		}
		if c.receiveNone(q, e.Expiry(), "the lease was renewed") && time.Now().After(orig) {
			checked++
		}
	}
	if checked == 0 {
		c.Logf("the machine was too slow to check hiding after the original deadline")
	}
	// Renewed once more: on a loaded machine the last receive may take
	// most of a lease, and the check is of Renew, not of a lease's end.
	if !c.renewHeld(e, "renew a held lease before completing it") {
		return
	}
	// The completion too may come after the lease ran out on a loaded
	// machine (a stall before it starts; where the result record goes to
	// another store first, a renewal during a slow write that came too
	// late). Then the task must come back.
	if !c.completeHeld(e) {
		again := c.receive(q, c.longVis(q))
		c.expectDelivery(again, e.Task.ID, e.DeliveryCount+1, "after a completion that outlasted the lease")
		c.complete(again)
		return
	}
	c.expectCode(e.Renew(c.ctx(), 0), errcode.FailedPrecondition, "Renew after Complete")
}

// renewHeld renews e's lease, failing the check if Renew fails while the
// lease was still held. It returns false, having logged that the machine
// was too slow, when the renew came back LockLost after the lease had run
// out (a stall of three quarters of a lease between renewals, on a loaded
// machine): a lease that ended before the renew took effect is rightly
// lost, and the check cannot go on with it.
func (c *C) renewHeld(e *jobq.Envelope, what string) bool {
	c.Helper()
	return c.whileHeld(e, what, func() error { return e.Renew(c.ctx(), 0) })
}

// whileHeld runs call, a settlement or renewal of e, and fails the check
// if it fails while e's lease was still held; a LockLost that came after
// the lease ran out is logged, and whileHeld returns false.
func (c *C) whileHeld(e *jobq.Envelope, what string, call func() error) bool {
	c.Helper()
	held := e.Expiry()
	err := call()
	switch {
	case err == nil:
		return true
	case errcode.Of(err) == errcode.LockLost && !time.Now().Before(held):
		c.Logf("the machine was too slow: the lease ran out at %v before %s took effect (%v)", held.Format(time.StampMilli), what, err)
		return false
	}
	c.Fatalf("%s: %v", what, err)
	return false
}

// checkLockLostChannel: LockLost closes, and Context's context ends with a
// LockLost cause, when the lease runs out, and neither happens for a
// message that was settled in time.
func checkLockLostChannel(c *C) {
	q := c.open()
	c.push(q, task("lost 1"), task("lost 2"))
	e1 := c.receive(q, c.vis())
	e2 := c.receive(q, c.vis())
	lost1, lost2 := e1.LockLost(), e2.LockLost()
	ctx1, cancel1 := e1.Context(context.Background())
	defer cancel1()
	ctx2, cancel2 := e2.Context(context.Background())
	defer cancel2()
	c.complete(e2)
	select {
	case <-lost1:
		if time.Now().Before(e1.Expiry().Add(-c.tolerance())) {
			c.Errorf("LockLost closed at %v, before the lease expiry %v", time.Now(), e1.Expiry())
		}
	case <-time.After(c.patience()):
		c.Fatalf("LockLost did not close within %v of a %v lease running out", c.patience(), c.vis())
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case <-lost2:
		c.Errorf("LockLost closed for a message completed while its lease was held")
	default:
	}
	if cause := context.Cause(ctx1); !errors.Is(cause, errcode.LockLost) {
		c.Errorf("the envelope's Context after its lease ran out: cause %v, want one matching errcode.LockLost", cause)
	}
	if ctx2.Err() != nil {
		c.Errorf("the envelope's Context ended (%v) for a message completed while its lease was held", context.Cause(ctx2))
	}
	late, cancelLate := e1.Context(context.Background())
	defer cancelLate()
	if cause := context.Cause(late); !errors.Is(cause, errcode.LockLost) {
		c.Errorf("Context taken after the lease was lost: cause %v, want one matching errcode.LockLost at once", cause)
	}
	// A receiver that takes the message makes the first holder's Renew
	// fail with LockLost.
	e3 := c.receive(q, c.longVis(q))
	if level(q, driver.LeaseRenewal) != driver.Unsupported {
		err := e1.Renew(c.ctx(), 0)
		c.expectCode(err, errcode.LockLost, "Renew after another receiver took the message")
	}
	c.complete(e3)
}

// checkSettleAfterLockLost: once another receiver holds the message, every
// settlement through the old lease fails with LockLost and changes nothing,
// and so does every later Complete or Renew of that envelope.
func checkSettleAfterLockLost(c *C) {
	url := c.newQueue()
	q1, q2 := c.openQueue(url), c.openQueue(url)
	type op struct {
		name    string
		retries int
		do      func(e *jobq.Envelope) error
	}
	ops := []op{
		{"complete", 0, func(e *jobq.Envelope) error { return e.Complete(c.ctx()) }},
		{"requeue", 0, func(e *jobq.Envelope) error { return e.Requeue(c.ctx(), 0) }},
		{"fail with retries left", 1, func(e *jobq.Envelope) error {
			_, err := e.Fail(c.ctx(), errors.New("boom"), "")
			return err
		}},
	}
	if level(q1, driver.DelayedRequeue) != driver.Unsupported {
		ops = append(ops, op{"requeue with delay", 0, func(e *jobq.Envelope) error { return e.Requeue(c.ctx(), c.vis()) }})
	}
	if level(q1, driver.DeadLetter) != driver.Unsupported {
		ops = append(ops,
			op{"dead-letter", 0, func(e *jobq.Envelope) error { return e.DeadLetter(c.ctx(), "conformance", "") }},
			op{"fail without retries", 0, func(e *jobq.Envelope) error {
				_, err := e.Fail(c.ctx(), errors.New("boom"), "")
				return err
			}})
	}
	if level(q1, driver.LeaseRenewal) != driver.Unsupported {
		ops = append(ops, op{"renew", 0, func(e *jobq.Envelope) error { return e.Renew(c.ctx(), 0) }})
	}
	byID := map[string]op{}
	for _, o := range ops {
		t := task("lock lost " + o.name)
		t.NumRetries = o.retries
		byID[c.push(q1, t)[0]] = o
	}
	old := c.receiveAll(q1, len(ops), c.vis())
	var latest time.Time
	for _, e := range old {
		latest = later(latest, e.Expiry())
	}
	time.Sleep(time.Until(latest))
	fresh := c.receiveAll(q2, len(ops), c.longVis(q2))
	settled := time.Now()
	for id, e := range old {
		o := byID[id]
		err := o.do(e)
		c.expectCode(err, errcode.LockLost, o.name+" through a lease another receiver took over")
		if err != nil && !errors.Is(err, errcode.LockLost) {
			c.Errorf("%s: errors.Is(err, errcode.LockLost) is false for %v", o.name, err)
		}
		select {
		case <-e.LockLost():
		default:
			c.Errorf("%s failed with LockLost but the envelope's LockLost channel is open", o.name)
		}
		// Every later call through the lost lease is LockLost too.
		c.expectCode(e.Complete(c.ctx()), errcode.LockLost, "complete after "+o.name+" found the lease lost")
		if level(q1, driver.LeaseRenewal) != driver.Unsupported {
			c.expectCode(e.Renew(c.ctx(), 0), errcode.LockLost, "renew after "+o.name+" found the lease lost")
		}
	}
	for id, e := range fresh {
		if e.DeliveryCount != 2 {
			c.Errorf("task %s: DeliveryCount %d after one lease expiry, want 2", id, e.DeliveryCount)
		}
		if err := e.Complete(c.ctx()); err != nil {
			c.Errorf("the current holder could not complete task %s (%s through the old lease must change nothing): %v", id, byID[id].name, err)
		}
	}
	if level(q1, driver.DeadLetter) != driver.Unsupported {
		dead, err := q1.Admin().DeadLetters(c.ctx(), 100)
		if err != nil {
			c.Fatalf("list dead letters: %v", err)
		}
		for _, d := range dead {
			c.Errorf("dead letter %s (%s) appeared although the dead-lettering lease was lost", d.MessageID, d.Reason)
		}
	}
	// A delayed requeue through the lost lease must not have left a copy
	// that appears once its delay is over (an emulation that schedules a
	// copy before checking the lease would).
	time.Sleep(time.Until(settled.Add(c.vis() + c.tolerance())))
	c.receiveNone(q1, time.Time{}, "every message was completed by its current holder")
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// receiveAll receives n distinct messages, keyed by task ID.
func (c *C) receiveAll(q *handle, n int, vis time.Duration) map[string]*jobq.Envelope {
	c.Helper()
	out := map[string]*jobq.Envelope{}
	ok := c.poll(func() bool {
		envs, err := q.ReceiveBatch(c.ctx(), n-len(out), jobq.ReceiveOptions{Visibility: vis, Wait: time.Second})
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		for _, e := range envs {
			if out[e.Task.ID] != nil {
				c.Errorf("task %s received twice while its lease was held", e.Task.ID)
			}
			out[e.Task.ID] = e
		}
		return len(out) >= n
	})
	if !ok {
		c.Fatalf("received %d of %d messages", len(out), n)
	}
	return out
}

// checkRequeueImmediate: Requeue(0) makes the message visible again at
// once, one delivery later.
func checkRequeueImmediate(c *C) {
	q := c.open()
	id := c.push(q, task("requeue"))[0]
	e := c.receive(q, c.longVis(q))
	if err := e.Requeue(c.ctx(), 0); err != nil {
		c.Fatalf("requeue: %v", err)
	}
	c.expectCode(e.Complete(c.ctx()), errcode.FailedPrecondition, "Complete after Requeue of the same envelope")
	e2 := c.receive(q, c.longVis(q))
	c.expectDelivery(e2, id, 2, "after Requeue(0)")
	c.complete(e2)
}

// checkRequeueDelayed: Requeue(delay) hides the message for the delay where
// native; otherwise the declared fallback applies.
func checkRequeueDelayed(c *C) {
	q := c.open()
	id := c.push(q, task("requeue later"))[0]
	e := c.receive(q, c.longVis(q))
	delay := c.vis()
	switch level(q, driver.DelayedRequeue) {
	case driver.Unsupported:
		c.expectCode(e.Requeue(c.ctx(), delay), errcode.Unimplemented, "Requeue(delay) on a backend without delayed requeue")
		c.complete(e) // the failed call must have left the lease alone
		return
	case driver.Emulated:
		if err := e.Requeue(c.ctx(), delay); err != nil {
			c.Fatalf("requeue with delay (emulated): %v", err)
		}
		e2 := c.receive(q, c.longVis(q))
		if e2.Task.ID != id {
			c.Errorf("received task %s, want %s", e2.Task.ID, id)
		}
		c.complete(e2)
		if n := len(q.logs.warnings(string(driver.DelayedRequeue))); n != 1 {
			c.Errorf("emulated delayed requeue logged %d warnings, want 1", n)
		}
		return
	}
	start := time.Now()
	if err := e.Requeue(c.ctx(), delay); err != nil {
		c.Fatalf("requeue with delay: %v", err)
	}
	visible := start.Add(delay)
	c.receiveNone(q, visible, fmt.Sprintf("the message was requeued with a %v delay", delay))
	e2 := c.receive(q, c.longVis(q))
	if early := time.Until(visible); early > c.tolerance() {
		c.Errorf("the requeued message came back %v before its delay ended", early)
	}
	c.expectDelivery(e2, id, 2, "after a delayed Requeue")
	c.complete(e2)
}
