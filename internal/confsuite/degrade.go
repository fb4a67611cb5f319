package confsuite

import (
	"errors"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// safeWhenUnsupported are the features the portable layer degrades itself
// when a backend lacks them; every other unsupported feature must fail
// with Unimplemented when used.
var safeWhenUnsupported = map[driver.Feature]bool{
	driver.Priority:      true,
	driver.ExactCount:    true,
	driver.Dedup:         true,
	driver.InPlaceUpdate: true,
}

// trigger uses feature f twice on q (the suite's way to make the portable
// layer consult the declaration), returning the first error.
func (c *C) trigger(q *handle, f driver.Feature) error {
	c.Helper()
	ctx := c.ctx()
	for i := range 2 {
		var err error
		switch f {
		case driver.Priority:
			t := task("trigger priority")
			t.Priority = 3 + i
			_, err = q.Push(ctx, t)
		case driver.DelayedPush:
			t := task("trigger delayed push")
			t.NotBefore = time.Now().Add(time.Duration(i+1) * c.vis())
			_, err = q.Push(ctx, t)
		case driver.DelayedRequeue:
			e := c.receiveFresh(q, "trigger delayed requeue")
			if err = e.Requeue(ctx, c.vis()); err != nil {
				_ = e.Complete(ctx)
			}
		case driver.LeaseRenewal:
			e := c.receiveFresh(q, "trigger renew")
			err = e.Renew(ctx, 0)
			_ = e.Complete(ctx)
		case driver.DeadLetter:
			e := c.receiveFresh(q, "trigger dead letter")
			if err = e.DeadLetter(ctx, "trigger", ""); err != nil {
				_ = e.Complete(ctx)
			}
		case driver.Peek:
			_, err = q.Admin().Peek(ctx, 1)
		case driver.InPlaceUpdate:
			e := c.receiveFresh(q, "trigger in-place update")
			_, err = e.Fail(ctx, errors.New("trigger"), "")
		case driver.BulkActions:
			_, err = q.Admin().RequeueWhere(ctx, jobq.Filter{Kind: "trigger", DryRun: true})
		default:
			c.Fatalf("the suite cannot trigger feature %s", f)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// receiveFresh pushes a task with retries and receives it.
func (c *C) receiveFresh(q *handle, name string) *jobq.Envelope {
	c.Helper()
	t := task(name + " " + time.Now().Format(time.RFC3339Nano))
	t.NumRetries = 5
	id := c.push(q, t)[0]
	for {
		e := c.receive(q, c.longVis(q))
		if e.Task.ID == id {
			return e
		}
		_ = e.Complete(c.ctx()) // an earlier trigger's message
	}
}

// triggerable are the features the suite can make the portable layer use.
var triggerable = []driver.Feature{
	driver.Priority, driver.DelayedPush, driver.DelayedRequeue, driver.LeaseRenewal,
	driver.DeadLetter, driver.Peek, driver.InPlaceUpdate, driver.BulkActions,
}

// checkDegradedWarnsOnce: using an emulated feature, or an unsupported one
// the portable layer can degrade safely, works and logs exactly one WARN
// per queue saying what happens instead.
func checkDegradedWarnsOnce(c *C) {
	url := c.newQueue()
	q := c.openQueue(url)
	caps := q.Capabilities()
	var degraded []driver.Feature
	for _, f := range triggerable {
		s := caps.Features[f]
		if s.Level == driver.Emulated || (s.Level == driver.Unsupported && safeWhenUnsupported[f]) {
			degraded = append(degraded, f)
		}
	}
	if len(degraded) == 0 {
		c.Skipf("every feature the suite can trigger is native on this backend")
	}
	for _, f := range degraded {
		if err := c.trigger(q, f); err != nil {
			c.Errorf("using degraded feature %s (%s) failed: %v", f, caps.Features[f].Level, err)
			continue
		}
		ws := q.logs.warnings(string(f))
		if len(ws) != 1 {
			c.Errorf("using degraded feature %s twice logged %d warnings, want exactly 1", f, len(ws))
			continue
		}
		instead := ws[0].attrs["instead"]
		if fb := caps.Features[f].Fallback; fb != "" && !strings.Contains(instead, fb) {
			c.Errorf("the warning for %s says %q instead, the declared fallback is %q", f, instead, fb)
		}
		if strings.TrimSpace(instead) == "" {
			c.Errorf("the warning for %s does not say what happens instead: %v", f, ws[0])
		}
	}
	// Warnings are per queue: another handle warns again, once.
	q2 := c.openQueue(url)
	if err := c.trigger(q2, degraded[0]); err != nil {
		c.Errorf("using degraded feature %s on a second handle: %v", degraded[0], err)
	} else if n := len(q2.logs.warnings(string(degraded[0]))); n != 1 {
		c.Errorf("a second queue handle logged %d warnings for %s, want 1", n, degraded[0])
	}
}

// checkUnimplementedUnsafe: an unsupported feature without a safe fallback
// fails with Unimplemented, names the feature, and changes nothing.
func checkUnimplementedUnsafe(c *C) {
	q := c.open()
	caps := q.Capabilities()
	var unsafe []driver.Feature
	for _, f := range triggerable {
		if caps.Level(f) == driver.Unsupported && !safeWhenUnsupported[f] {
			unsafe = append(unsafe, f)
		}
	}
	if len(unsafe) == 0 {
		c.Skipf("no feature the suite can trigger is unsupported without a safe fallback")
	}
	for _, f := range unsafe {
		err := c.trigger(q, f)
		c.expectCode(err, errcode.Unimplemented, "using unsupported feature "+string(f))
		if err != nil && !errors.Is(err, errcode.Unimplemented) {
			c.Errorf("errors.Is(err, errcode.Unimplemented) is false for %v", err)
		}
		if err != nil && !strings.Contains(err.Error(), string(f)) {
			c.Errorf("the Unimplemented error does not name the feature %s: %v", f, err)
		}
		if ws := q.logs.warnings(string(f)); len(ws) != 0 {
			c.Errorf("unsupported feature %s failed and also logged a degradation warning: %v", f, ws)
		}
	}
	// Failed calls leave nothing behind: every pushed trigger task was
	// completed and a refused delayed push stored nothing.
	c.receiveNone(q, time.Time{}, "every refused operation must leave the queue as it was")
}
