package confsuite

import (
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// want are expected Stats counts.
type want struct{ ready, inFlight, delayed, dead int64 }

// expectStats checks the counts the backend says it knows, exactly when it
// declares ExactCount native (waiting a little for them to settle), and
// only for sanity otherwise. A count the backend does not know must be zero.
func (c *C) expectStats(q *handle, w want) {
	c.Helper()
	var st driver.Stats
	match := func() bool {
		var err error
		st, err = q.Admin().Stats(c.ctx())
		if err != nil {
			c.Fatalf("stats: %v", err)
		}
		k := st.Known
		return (!k.Ready || st.Ready == w.ready) && (!k.InFlight || st.InFlight == w.inFlight) &&
			(!k.Delayed || st.Delayed == w.delayed) && (!k.Dead || st.Dead == w.dead)
	}
	exact := level(q, driver.ExactCount) == driver.Native
	if exact {
		if !c.poll(match) {
			c.Errorf("stats are %+v, want ready %d, in flight %d, delayed %d, dead %d (for the counts marked known)",
				st, w.ready, w.inFlight, w.delayed, w.dead)
		}
	} else {
		match()
		c.Logf("approximate stats %+v; exact would be %+v", st, w)
	}
	k := st.Known
	for _, f := range []struct {
		name  string
		known bool
		n     int64
	}{{"Ready", k.Ready, st.Ready}, {"InFlight", k.InFlight, st.InFlight}, {"Delayed", k.Delayed, st.Delayed}, {"Dead", k.Dead, st.Dead}} {
		if f.n < 0 {
			c.Errorf("stats count %s is negative: %d", f.name, f.n)
		}
		if !f.known && f.n != 0 {
			c.Errorf("stats count %s is %d but marked unknown; an unknown count must be zero", f.name, f.n)
		}
	}
	if exact {
		size, err := q.Admin().Size(c.ctx())
		if err != nil {
			c.Errorf("size: %v", err)
		} else if size != st.Ready+st.InFlight+st.Delayed {
			c.Errorf("Size is %d, stats say %+v", size, st)
		}
	}
}

// checkPeek: Peek shows messages without claiming them: no delivery is
// counted and a later Receive sees them as first deliveries.
func checkPeek(c *C) {
	q := c.open()
	if level(q, driver.Peek) == driver.Unsupported {
		_, err := q.Admin().Peek(c.ctx(), 10)
		c.expectCode(err, errcode.Unimplemented, "Peek on a backend without peek")
		return
	}
	ids := c.push(q, task("peek 1"), task("peek 2"), task("peek 3"))
	pushed := map[string]bool{ids[0]: true, ids[1]: true, ids[2]: true}
	var ps []*jobq.PeekedTask
	c.poll(func() bool {
		var err error
		if ps, err = q.Admin().Peek(c.ctx(), 10); err != nil {
			c.Fatalf("peek: %v", err)
		}
		return len(ps) >= 3
	})
	wantN := 3
	if mp := q.Capabilities().MaxPeek; mp > 0 && mp < wantN {
		wantN = mp
	}
	if len(ps) != wantN {
		c.Errorf("Peek(10) returned %d messages, want %d", len(ps), wantN)
	}
	seen := map[string]bool{}
	for _, p := range ps {
		switch {
		case p.Task == nil:
			c.Errorf("peeked message %s does not decode: %v", p.MessageID, p.DecodeErr)
		case !pushed[p.Task.ID]:
			c.Errorf("peeked unknown task %s", p.Task.ID)
		case seen[p.Task.ID]:
			c.Errorf("Peek returned task %s twice", p.Task.ID)
		default:
			seen[p.Task.ID] = true
		}
		if p.InFlight || p.DeliveryCount != 0 {
			c.Errorf("peeked message %s before any receive shows InFlight %v, DeliveryCount %d", p.MessageID, p.InFlight, p.DeliveryCount)
		}
	}
	if one, err := q.Admin().Peek(c.ctx(), 1); err != nil || len(one) != 1 {
		c.Errorf("Peek(1) returned %d messages, error %v; want 1", len(one), err)
	}
	c.expectStats(q, want{ready: 3})
	envs := c.receiveAll(q, 3, c.longVis(q))
	for id, e := range envs {
		if e.DeliveryCount != 1 {
			c.Errorf("task %s: DeliveryCount %d after peeks and one receive, want 1", id, e.DeliveryCount)
		}
	}
	// A leased message is either hidden from Peek or shown in flight.
	ps, err := q.Admin().Peek(c.ctx(), 10)
	if err != nil {
		c.Fatalf("peek: %v", err)
	}
	for _, p := range ps {
		if !p.InFlight {
			c.Errorf("Peek shows leased message %s as not in flight", p.MessageID)
		}
	}
	for _, e := range envs {
		c.complete(e)
	}
}

// checkStats: the counts of ready, in-flight, delayed and dead messages.
func checkStats(c *C) {
	q := c.open()
	c.expectStats(q, want{})
	var w want
	dl := level(q, driver.DeadLetter) != driver.Unsupported
	if dl {
		c.push(q, task("stats dead"))
		if err := c.receive(q, c.longVis(q)).DeadLetter(c.ctx(), "stats", ""); err != nil {
			c.Fatalf("dead-letter: %v", err)
		}
		w.dead = 1
	}
	c.push(q, task("stats in flight"))
	held := c.receive(q, c.longVis(q))
	w.inFlight = 1
	c.push(q, task("stats ready 1"), task("stats ready 2"))
	w.ready = 2
	if level(q, driver.DelayedPush) == driver.Native {
		t := task("stats delayed")
		t.NotBefore = time.Now().Add(time.Hour)
		c.push(q, t)
		w.delayed = 1
	}
	c.expectStats(q, w)
	c.complete(held)
	w.inFlight = 0
	c.expectStats(q, w)
}

// checkClear: Clear deletes ready and delayed messages and keeps dead
// letters; an in-flight message may go or stay.
func checkClear(c *C) {
	q := c.open()
	dl := level(q, driver.DeadLetter) != driver.Unsupported
	if dl {
		c.push(q, task("clear dead"))
		if err := c.receive(q, c.longVis(q)).DeadLetter(c.ctx(), "kept by clear", ""); err != nil {
			c.Fatalf("dead-letter: %v", err)
		}
	}
	c.push(q, task("clear in flight"))
	held := c.receive(q, c.longVis(q))
	c.push(q, task("clear 1"), task("clear 2"), task("clear 3"))
	n := int64(3)
	if level(q, driver.DelayedPush) == driver.Native {
		t := task("clear delayed")
		t.NotBefore = time.Now().Add(time.Hour)
		c.push(q, t)
		n++
	}
	got, err := q.Admin().Clear(c.ctx())
	if err != nil {
		c.Fatalf("clear: %v", err)
	}
	if got != -1 && got != n && got != n+1 {
		c.Errorf("Clear reported %d deleted, want %d (or %d counting the in-flight one, or -1)", got, n, n+1)
	}
	c.receiveNone(q, time.Time{}, "the queue was cleared")
	if err := held.Complete(c.ctx()); err != nil && errcode.Of(err) != errcode.LockLost {
		c.Errorf("completing a message held across Clear: %v; want success or LockLost", err)
	}
	w := want{}
	if dl {
		w.dead = 1
		c.listDead(q, 1)
	}
	c.expectStats(q, w)
}
