package confsuite

import (
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/queueurl"
	"github.com/jobq/jobq/internal/redact"
)

// openDriver opens rawURL through the backend's registered opener, without
// newDriver opens a driver on a new queue: from Harness.NewDriver for a
// harness of driver values, else through the URL's registered opener.
func (c *C) newDriver() driver.Driver {
	c.Helper()
	if !c.h.byDriver() {
		return c.openDriver(c.newQueue())
	}
	ref := c.newQueue()
	d, err := c.h.NewDriver(c.ctx(), ref)
	if err != nil || d == nil {
		c.Fatalf("Harness.NewDriver(%q) = %v, %v", ref, d, err)
	}
	c.Cleanup(func() { _ = d.Close() })
	return d
}

// the portable layer, and closes it when the check ends.
func (c *C) openDriver(rawURL string) driver.Driver {
	c.Helper()
	u, err := url.Parse(queueurl.Normalize(rawURL))
	if err != nil {
		c.Fatalf("parse %s: %v", redact.URL(rawURL), err)
	}
	if v := u.Query(); v.Has("stash") { // the portable layer's own
		v.Del("stash")
		u.RawQuery = v.Encode()
	}
	o, ok := jobq.DefaultURLMux().Opener(u.Scheme)
	if !ok {
		c.Fatalf("no backend is registered for scheme %q", u.Scheme)
	}
	d, err := o.Open(c.ctx(), u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		c.Fatalf("open %s: %v", redact.URL(rawURL), err)
	}
	c.Cleanup(func() { _ = d.Close() })
	return d
}

// receiveLeases pushes one message per id on d and receives them all, by
// task ID.
func (c *C) receiveLeases(d driver.Driver, ids ...string) map[string]driver.Lease {
	c.Helper()
	msgs := make([]*driver.Message, len(ids))
	for i, id := range ids {
		msgs[i] = &driver.Message{ID: id, Body: []byte(`{"version": 1, "reply_requested": false, "kwargs": "{}", "num_retries": 0, "id": "` + id + `"}`)}
	}
	if _, err := d.Push(c.ctx(), msgs); err != nil {
		c.Fatalf("push %v: %v", ids, err)
	}
	got := map[string]driver.Lease{}
	deadline := time.Now().Add(c.patience())
	for len(got) < len(ids) && time.Now().Before(deadline) {
		vis := time.Minute
		if m := d.Capabilities().MaxVisibility; m > 0 {
			vis = min(vis, m)
		}
		rs, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: 1, Visibility: vis, Wait: time.Second})
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		for _, r := range rs {
			got[r.ID] = r.Lease
		}
	}
	if len(got) < len(ids) {
		c.Fatalf("received %d of %d messages pushed", len(got), len(ids))
	}
	return got
}

// staleLease returns a lease of id that is no longer held: the message is
// requeued under it.
func (c *C) staleLease(d driver.Driver, l driver.Lease) driver.Lease {
	c.Helper()
	if errs := d.Requeue(c.ctx(), []driver.RequeueParams{{Lease: l}}); errs != nil {
		c.Fatalf("requeue: %v", errs[0])
	}
	return l
}

// checkSettleWithRecords: on a backend whose result records are native, a
// settlement's record (CompleteParams.Result, DeadLetterParams.Result) is
// stored by the settlement itself, and only where the lease was held; a
// settlement without a record stores none. After Close, every item of a
// settlement batch fails with FailedPrecondition.
func checkSettleWithRecords(c *C) {
	d := c.newDriver()
	if rs, ok := d.(driver.ResultStore); ok && d.Capabilities().Level(driver.Results) == driver.Native {
		c.settleRecords(d, rs)
	} else {
		c.Logf("result records are not native (the portable layer stores them before the settlement): only the closed driver is checked")
	}
	if err := d.Close(); err != nil {
		c.Fatalf("close: %v", err)
	}
	// The leases are not looked at: a closed driver refuses the batch.
	a, b := driver.Lease{MessageID: "1", Token: "x"}, driver.Lease{MessageID: "2", Token: "y"}
	for name, errs := range map[string][]error{
		"Complete":   d.Complete(c.ctx(), driver.Completions(a, b)),
		"Requeue":    d.Requeue(c.ctx(), []driver.RequeueParams{{Lease: a}, {Lease: b}}),
		"DeadLetter": d.DeadLetter(c.ctx(), []driver.DeadLetterParams{{Lease: a}, {Lease: b}}),
	} {
		if len(errs) != 2 || d.ErrorCode(errs[0]) != errcode.FailedPrecondition || d.ErrorCode(errs[1]) != errcode.FailedPrecondition {
			c.Errorf("%s of two leases after Close = %v; want FailedPrecondition for each", name, errs)
		}
	}
}

// settleRecords is the records part of checkSettleWithRecords.
func (c *C) settleRecords(d driver.Driver, rs driver.ResultStore) {
	now := time.Now()
	rec := func(id string, s driver.ResultState) *driver.ResultRecord {
		return &driver.ResultRecord{ID: id, State: s, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Data: []byte(`{"conformance":true}`)}
	}
	states := func(ids ...string) string {
		got, err := rs.GetResults(c.ctx(), ids)
		if err != nil {
			c.Fatalf("get results: %v", err)
		}
		out := ""
		for i, r := range got {
			s := "-"
			if r != nil {
				s = string(r.State)
			}
			out += fmt.Sprintf("%s=%s ", ids[i], s)
		}
		return out
	}
	p := "settle-" + fmt.Sprint(now.UnixNano()) + "-"
	a, b, cc, dd, e := p+"a", p+"b", p+"c", p+"d", p+"e"
	held := c.receiveLeases(d, a, b, cc, dd, e)
	lostB, lostE := c.staleLease(d, held[b]), c.staleLease(d, held[e])

	errs := d.Complete(c.ctx(), []driver.CompleteParams{
		{Lease: held[a], Result: rec(a, driver.ResultSucceeded)},
		{Lease: lostB, Result: rec(b, driver.ResultSucceeded)},
		{Lease: held[cc]},
	})
	if len(errs) != 3 || errs[0] != nil || d.ErrorCode(errs[1]) != errcode.LockLost || errs[2] != nil {
		c.Errorf("Complete(held+record, lost+record, held) = %v; want [nil LockLost nil]", errs)
	}
	if d.Capabilities().Level(driver.DeadLetter) != driver.Unsupported {
		errs = d.DeadLetter(c.ctx(), []driver.DeadLetterParams{
			{Lease: held[dd], Reason: "conformance", Result: rec(dd, driver.ResultDeadLettered)},
			{Lease: lostE, Reason: "conformance", Result: rec(e, driver.ResultDeadLettered)},
		})
		if len(errs) != 2 || errs[0] != nil || d.ErrorCode(errs[1]) != errcode.LockLost {
			c.Errorf("DeadLetter(held+record, lost+record) = %v; want [nil LockLost]", errs)
		}
	} else {
		dd = ""
	}
	want := fmt.Sprintf("%s=succeeded %s=- %s=- ", a, b, cc)
	if dd != "" {
		want += fmt.Sprintf("%s=dead-lettered %s=- ", dd, e)
	}
	ids := []string{a, b, cc}
	if dd != "" {
		ids = append(ids, dd, e)
	}
	if got := states(ids...); got != want {
		c.Errorf("records after the settlements: %s; want %s (a record only where the settlement happened and carried one)", got, want)
	}

}
