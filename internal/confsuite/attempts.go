package confsuite

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
)

// checkAttemptHistory: where messages are updated in place, a recorded
// failure and a delivery whose lease expired both show in the next
// delivery's attempt history; elsewhere the history is empty.
func checkAttemptHistory(c *C) {
	q := c.open()
	t := task("attempt history")
	t.NumRetries = 3
	t.Metadata = map[string]string{"check": "attempts"} // schema v2 on every backend
	t.RetryBackoff = quickRetry                         // the retries' timing is checkRetryBackoff's
	c.push(q, t)
	e := c.receive(q, c.longVis(q))
	code := 7
	hooks.RecordAttempt(e, jobq.Attempt{Worker: "conformance-1", Host: "here", Start: time.Now(), End: time.Now(), Outcome: jobq.OutcomeFailure, ExitCode: &code})
	if _, err := e.Fail(c.ctx(), errors.New("exit 7"), ""); err != nil {
		c.Fatalf("fail: %v", err)
	}
	// Delivery 2 is abandoned: its lease expires.
	lost := c.receive(q, c.vis())
	var e3 *jobq.Envelope
	if !c.poll(func() bool {
		got, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: c.vis()})
		if err == nil {
			e3 = got
		}
		return err == nil
	}) {
		c.Fatalf("the message did not come back after delivery %d's lease of %v expired", lost.DeliveryCount, c.vis())
	}
	defer c.complete(e3)
	if level(q, driver.InPlaceUpdate) != driver.Native {
		if as := e3.Attempts(); len(as) != 0 {
			c.Errorf("in-place update is %v, yet delivery %d has attempts %+v; the history needs in-place update", level(q, driver.InPlaceUpdate), e3.DeliveryCount, as)
		}
		return
	}
	var got []string
	for _, a := range e3.Attempts() {
		got = append(got, fmt.Sprintf("%d:%s", a.Delivery, a.Outcome))
	}
	want := []string{"1:failure"}
	for d := 2; d < e3.DeliveryCount; d++ {
		want = append(want, fmt.Sprintf("%d:%s", d, jobq.OutcomeLeaseExpired))
	}
	if !slices.Equal(got, want) || e3.DeliveryCount < 3 {
		c.Fatalf("delivery %d sees attempts %v; want %v (the recorded failure, then the expired lease)", e3.DeliveryCount, got, want)
	}
	if a := e3.Attempts()[0]; a.Worker != "conformance-1" || a.ExitCode == nil || *a.ExitCode != code {
		c.Errorf("the recorded attempt came back as %+v; want worker conformance-1 with exit code %d", a, code)
	}
	if l := hooks.LostDeliveries(e3); !slices.Contains(l, lost.DeliveryCount) {
		c.Errorf("LostDeliveries = %v; want it to name delivery %d, whose lease expired", l, lost.DeliveryCount)
	}
}

// checkSnooze: a snoozed task (worker.Snooze: an attempt recorded as
// snoozed, then a Requeue with a delay where the backend can delay one)
// comes back with its retry budget unspent and, where messages are updated
// in place, with the snooze in its attempt history.
func checkSnooze(c *C) {
	q := c.open()
	t := task("snooze")
	t.NumRetries = 1
	t.Metadata = map[string]string{"check": "snooze"} // schema v2 on every backend
	id := c.push(q, t)[0]
	e := c.receive(q, c.longVis(q))
	hooks.RecordAttempt(e, jobq.Attempt{Worker: "conformance-1", Start: time.Now(), End: time.Now(), Outcome: jobq.OutcomeSnoozed})
	var delay time.Duration
	if level(q, driver.DelayedRequeue) != driver.Unsupported {
		delay = c.vis() / 2
	}
	if err := e.Requeue(c.ctx(), delay); err != nil {
		c.Fatalf("requeue a snoozed task: %v", err)
	}
	var e2 *jobq.Envelope
	if !c.poll(func() bool {
		got, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: c.vis()})
		e2 = got
		return err == nil
	}) {
		c.Fatalf("the snoozed task did not come back")
	}
	defer c.complete(e2)
	if e2.Task.ID != id {
		c.Fatalf("received task %s; want the snoozed %s", e2.Task.ID, id)
	}
	if n := e2.RetriesLeft(); n != 1 {
		c.Errorf("the snoozed task has %d retries left; want 1: a snooze spends none", n)
	}
	if level(q, driver.InPlaceUpdate) != driver.Native {
		return
	}
	var got []string
	for _, a := range e2.Attempts() {
		got = append(got, fmt.Sprintf("%d:%s", a.Delivery, a.Outcome))
	}
	if want := []string{"1:" + string(jobq.OutcomeSnoozed)}; !slices.Equal(got, want) {
		c.Errorf("the snoozed task's history is %v; want %v", got, want)
	}
}
