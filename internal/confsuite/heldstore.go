package confsuite

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
)

// checkHeldStore: the driver contract of held tasks (driver.HeldStore,
// driver/held.go) on a backend that declares dependencies: a held message
// is not claimable; Hold refuses as duplicates an ID already held or
// queued; ListHeld pages in ID order; Release queues a message as Push
// stores it (priority, delay, trace context and group kept, the group
// counted once) and, raced by 8 sweepers, once; Drop removes and counts
// the group's cancelled; IDs no longer held are left out without error.
func checkHeldStore(c *C) {
	d := c.newDriver()
	if lv := d.Capabilities().Level(driver.Dependencies); lv == driver.Unsupported {
		c.Skipf("dependencies are unsupported: %s", d.Capabilities().Features[driver.Dependencies].Fallback)
	}
	hs, ok := d.(driver.HeldStore)
	if !ok {
		c.Fatalf("dependencies are declared %s but the driver (%T) is not a driver.HeldStore", d.Capabilities().Level(driver.Dependencies), d)
	}
	g := fmt.Sprintf("held-%d", time.Now().UnixNano())
	held := c.holdFirst(d, hs, g)
	c.heldPages(hs, held)
	c.heldRelease(d, hs, g)
	c.heldRace(d, hs)
	c.heldDrop(d, hs, g+"-drop")
	c.heldQueuedMeanwhile(d, hs, g+"-meanwhile")
}

// heldReceiveMax is how many messages the check asks one receive for: 10,
// or the backend's batch limit when lower.
func heldReceiveMax(d driver.Driver) int {
	if m := d.Capabilities().MaxReceiveBatch; m > 0 && m < 10 {
		return m
	}
	return 10
}

// heldVisibility is the lease the check's receives ask for: a minute, or
// the backend's longest when shorter.
func heldVisibility(d driver.Driver) time.Duration {
	if m := d.Capabilities().MaxVisibility; m > 0 && m < time.Minute {
		return m
	}
	return time.Minute
}

// heldBody is a distinct valid v1 task body for id.
func heldBody(id string) []byte {
	return []byte(`{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"echo held ` + id + `\"}", "num_retries": 0, "id": "` + id + `"}`)
}

// receivedID is r's task ID: the driver's, or, where the driver keeps
// none beside the body (Azure Storage Queue), the body's "id".
func receivedID(r *driver.Received) string {
	if r.ID != "" {
		return r.ID
	}
	var b struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.ID
}

// heldMsg is a held message of id with no conditions set.
func heldMsg(id string) *driver.HeldMessage {
	return &driver.HeldMessage{Message: driver.Message{ID: id, Body: heldBody(id)}, Created: time.Now()}
}

// hold holds msgs and returns the results.
func (c *C) hold(hs driver.HeldStore, msgs ...*driver.HeldMessage) []driver.PushResult {
	c.Helper()
	res, err := hs.Hold(c.ctx(), msgs)
	if err != nil {
		c.Fatalf("Hold of %d messages: %v", len(msgs), err)
	}
	if len(res) != len(msgs) {
		c.Fatalf("Hold of %d messages returned %d results", len(msgs), len(res))
	}
	return res
}

// heldGroups returns d's group store when groups are native, else nil.
func heldGroups(d driver.Driver) driver.GroupStore {
	gs, ok := d.(driver.GroupStore)
	if !ok || d.Capabilities().Level(driver.Groups) != driver.Native {
		return nil
	}
	return gs
}

// expectHeldGroup checks group g's counters on a backend with native
// groups; split checks Queued and Delayed too where the backend splits.
func (c *C) expectHeldGroup(d driver.Driver, g string, want driver.GroupCounters, when string) {
	c.Helper()
	gs := heldGroups(d)
	if gs == nil {
		return
	}
	got, err := gs.GroupCounts(c.ctx(), g)
	if err != nil || got == nil {
		c.Errorf("GroupCounts(%s) %s = %v, %v; want %+v", g, when, got, err, want)
		return
	}
	w := want
	w.Name, w.Created, w.Updated, w.Split = got.Name, got.Created, got.Updated, got.Split
	if !got.Split {
		w.Queued, w.Delayed, w.Running = 0, 0, 0
	}
	if *got != w {
		c.Errorf("group %s %s: %+v; want %+v", g, when, *got, w)
	}
}

// receiveNoneDriver checks that d has no claimable message.
func (c *C) receiveNoneDriver(d driver.Driver, why string) {
	c.Helper()
	rs, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: heldReceiveMax(d), Visibility: heldVisibility(d)})
	if err != nil {
		c.Fatalf("receive: %v", err)
	}
	for _, r := range rs {
		c.Errorf("%s, but Receive returned task %q", why, r.ID)
	}
}

// holdFirst holds three messages of group g (priorities 5 and 1, one
// delayed an hour, one traced), checks that none is claimable, that
// holding one of them again, a queued or running task's ID or an ID twice
// in one batch is a duplicate, and HeldOf. It returns the IDs held.
func (c *C) holdFirst(d driver.Driver, hs driver.HeldStore, g string) []string {
	c.Helper()
	a, b, dl := heldMsg("held-a"), heldMsg("held-b"), heldMsg("held-c")
	a.Message.Priority, a.Message.Group, a.After, a.Require = 5, g, []string{"parent-1", "parent-2"}, driver.RequireSucceeded
	b.Message.Priority, b.Message.Group, b.AfterGroups, b.Require = 1, g, []string{"other-group"}, driver.RequireEnded
	b.Message.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	b.Message.ConcurrencyKey, b.Message.RateLimitKey = "held-ckey", "held-rkey"
	dl.Message.Group, dl.Message.NotBefore, dl.After = g, time.Now().Add(time.Hour), []string{"parent-1"}
	for i, r := range c.hold(hs, a, b, dl) {
		if r.Duplicate {
			c.Errorf("Hold of a new message (%d) reported Duplicate", i)
		}
	}
	c.expectHeldGroup(d, g, driver.GroupCounters{Pushed: 3}, "after Hold of 3 of its tasks (counted as pushed)")
	c.receiveNoneDriver(d, "every message is held")
	c.pushHeldID(d, a.Message.ID)

	if _, err := d.Push(c.ctx(), []*driver.Message{{ID: "held-queued", Body: heldBody("held-queued")}}); err != nil {
		c.Fatalf("push: %v", err)
	}
	// Emulated held stores (Azure) keep held tasks apart from the queue
	// and cannot see a queued or running ID (their fallback says so).
	native := d.Capabilities().Level(driver.Dependencies) == driver.Native
	dups := c.hold(hs, heldMsg("held-a"), heldMsg("held-queued"), heldMsg("held-twice"), heldMsg("held-twice"))
	for i, what := range []string{"an ID already held", "an ID queued", "", "an ID twice in one batch"} {
		if what == "an ID queued" && !native {
			continue
		}
		if what != "" && !dups[i].Duplicate {
			c.Errorf("Hold of %s: Duplicate false; want true (nothing stored)", what)
		}
	}
	if dups[2].Duplicate {
		c.Errorf("Hold of a new ID (the first of two copies in one batch) reported Duplicate")
	}
	rs, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: heldReceiveMax(d), Visibility: heldVisibility(d)})
	if err != nil || len(rs) != 1 || rs[0].ID != "held-queued" && rs[0].ID != "" {
		c.Fatalf("receive after Hold of a queued ID = %d messages, %v; want the queued one alone", len(rs), err)
	}
	if r := c.hold(hs, heldMsg("held-queued")); native && !r[0].Duplicate {
		c.Errorf("Hold of the ID of a running task: Duplicate false; want true (nothing stored)")
	}
	if errs := d.Complete(c.ctx(), driver.Completions(rs[0].Lease)); errs != nil && errs[0] != nil {
		c.Fatalf("complete: %v", errs[0])
	}
	if !native {
		if _, err := hs.Drop(c.ctx(), []string{"held-queued"}); err != nil {
			c.Fatalf("Drop of held-queued (held beside the queued one, unseen): %v", err)
		}
	}
	c.heldOf(hs, []*driver.HeldMessage{a, b, dl})
	return []string{a.Message.ID, b.Message.ID, dl.Message.ID, "held-twice"}
}

// pushHeldID checks, where dedup and dependencies are native, that a push
// of a held task's ID, alone and in a batch, is a duplicate: stored, it
// would run ahead of the held copy's parents, and again at its release.
func (c *C) pushHeldID(d driver.Driver, id string) {
	c.Helper()
	caps := d.Capabilities()
	if caps.Level(driver.Dedup) != driver.Native || caps.Level(driver.Dependencies) != driver.Native {
		return
	}
	for _, batch := range [][]*driver.Message{
		{{ID: id, Body: heldBody(id)}},
		{{ID: id, Body: heldBody(id)}, {ID: id + "-beside", Body: heldBody(id + "-beside")}},
	} {
		res, err := d.Push(c.ctx(), batch)
		if err != nil || len(res) != len(batch) {
			c.Fatalf("push of a held ID in a batch of %d = %v, %v", len(batch), res, err)
		}
		if !res[0].Duplicate {
			c.Errorf("push of held ID %q in a batch of %d: Duplicate false; want true (nothing stored)", id, len(batch))
		}
		if len(batch) > 1 && res[1].Duplicate {
			c.Errorf("push of a new ID beside a held one reported Duplicate")
		}
	}
	rs, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: heldReceiveMax(d), Visibility: heldVisibility(d)})
	if err != nil {
		c.Fatalf("receive: %v", err)
	}
	for _, r := range rs {
		if receivedID(r) != id+"-beside" {
			c.Errorf("after pushes of held ID %q, Receive returned task %q; want only %q", id, receivedID(r), id+"-beside")
		}
		if errs := d.Complete(c.ctx(), driver.Completions(r.Lease)); errs != nil && errs[0] != nil {
			c.Fatalf("complete: %v", errs[0])
		}
	}
	if len(rs) != 1 {
		c.Errorf("after pushes of held ID %q and one new ID, Receive returned %d tasks; want 1", id, len(rs))
	}
}

// heldQueuedMeanwhile: where dedup and dependencies are native, a dead
// letter requeued under a held task's ID (requeues do not look at held
// tasks) is not queued twice by the release: the held copy is removed and
// reported released, and its group, which counted it at Hold, counts it
// cancelled, so the group can still end.
func (c *C) heldQueuedMeanwhile(d driver.Driver, hs driver.HeldStore, g string) {
	c.Helper()
	caps := d.Capabilities()
	if caps.Level(driver.Dedup) != driver.Native || caps.Level(driver.Dependencies) != driver.Native ||
		caps.Level(driver.DeadLetter) != driver.Native {
		return
	}
	const id = "held-meanwhile"
	c.heldAndRequeued(d, hs, id, g)
	rel, err := hs.Release(c.ctx(), []string{id})
	if err != nil || len(rel) != 1 || rel[0] != id {
		c.Fatalf("Release of an ID queued meanwhile = %v, %v; want [%s]", rel, err, id)
	}
	rs, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: heldReceiveMax(d), Visibility: heldVisibility(d)})
	if err != nil || len(rs) != 1 || !strings.Contains(string(rs[0].Body), "requeued") {
		c.Fatalf("receive after the release = %d messages, %v; want the requeued one alone", len(rs), err)
	}
	if errs := d.Complete(c.ctx(), driver.Completions(rs[0].Lease)); errs != nil && errs[0] != nil {
		c.Fatalf("complete: %v", errs[0])
	}
	if left, err := hs.HeldOf(c.ctx(), []string{id}); err != nil || len(left) != 0 {
		c.Errorf("HeldOf after the release = %d, %v; want none", len(left), err)
	}
	c.expectHeldGroup(d, g, driver.GroupCounters{Pushed: 1, Cancelled: 1}, "after the release of a held task whose ID was queued meanwhile (counted at Hold, then cancelled)")
}

// heldAndRequeued leaves task id both held (in group g) and queued: pushed,
// dead-lettered, held, then requeued from the dead letters.
func (c *C) heldAndRequeued(d driver.Driver, hs driver.HeldStore, id, g string) {
	c.Helper()
	if _, err := d.Push(c.ctx(), []*driver.Message{{ID: id, Body: heldBody(id + " requeued")}}); err != nil {
		c.Fatalf("push: %v", err)
	}
	rs, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: 1, Visibility: heldVisibility(d)})
	if err != nil || len(rs) != 1 {
		c.Fatalf("receive = %d messages, %v; want 1", len(rs), err)
	}
	if errs := d.DeadLetter(c.ctx(), []driver.DeadLetterParams{{Lease: rs[0].Lease, Reason: "for the check"}}); errs != nil && errs[0] != nil {
		c.Fatalf("dead-letter: %v", errs[0])
	}
	h := heldMsg(id)
	h.Message.Group = g
	if r := c.hold(hs, h); r[0].Duplicate {
		c.Fatalf("Hold of the ID of a dead letter reported Duplicate")
	}
	if n, err := d.RequeueDead(c.ctx(), nil); err != nil || n != 1 {
		c.Fatalf("RequeueDead = %d, %v; want 1", n, err)
	}
}

// heldOf checks that HeldOf returns want (by ID, fields kept) and leaves
// out IDs that are not held.
func (c *C) heldOf(hs driver.HeldStore, want []*driver.HeldMessage) {
	c.Helper()
	ids := []string{"never-held"}
	for _, w := range want {
		ids = append(ids, w.Message.ID)
	}
	got, err := hs.HeldOf(c.ctx(), ids)
	if err != nil {
		c.Fatalf("HeldOf: %v", err)
	}
	if len(got) != len(want) {
		c.Errorf("HeldOf(%v) returned %d messages; want %d", ids, len(got), len(want))
	}
	byID := map[string]*driver.HeldMessage{}
	for _, h := range got {
		byID[h.Message.ID] = h
	}
	for _, w := range want {
		h := byID[w.Message.ID]
		if h == nil {
			c.Errorf("HeldOf left out %s, which is held", w.Message.ID)
			continue
		}
		c.sameHeld(h, w)
	}
}

// sameHeld checks that h, read back, is w as held.
func (c *C) sameHeld(h, w *driver.HeldMessage) {
	c.Helper()
	m, wm := h.Message, w.Message
	if string(m.Body) != string(wm.Body) || m.Priority != wm.Priority || m.Group != wm.Group || m.TraceParent != wm.TraceParent ||
		m.ConcurrencyKey != wm.ConcurrencyKey || m.RateLimitKey != wm.RateLimitKey || !m.NotBefore.Equal(wm.NotBefore) && m.NotBefore.Sub(wm.NotBefore).Abs() > time.Millisecond {
		c.Errorf("held message %s read back as %+v; want %+v", wm.ID, m, wm)
	}
	if !slices.Equal(h.After, w.After) || !slices.Equal(h.AfterGroups, w.AfterGroups) || h.Require != w.Require {
		c.Errorf("held message %s read back with After %v AfterGroups %v Require %q; want %v %v %q",
			wm.ID, h.After, h.AfterGroups, h.Require, w.After, w.AfterGroups, w.Require)
	}
	if h.Created.IsZero() || h.Created.Sub(w.Created).Abs() > time.Minute {
		c.Errorf("held message %s read back with Created %v; want about %v", wm.ID, h.Created, w.Created)
	}
}

// heldPages holds 23 more messages and pages through them all with
// ListHeld 5 at a time: ascending IDs, no page larger, every held ID
// once, the cursor ending at "".
func (c *C) heldPages(hs driver.HeldStore, before []string) {
	c.Helper()
	want := slices.Clone(before)
	var more []*driver.HeldMessage
	for i := range 23 {
		id := fmt.Sprintf("held-page-%02d", (i*7)%23) // not in ID order
		more = append(more, heldMsg(id))
		want = append(want, id)
	}
	c.hold(hs, more...)
	slices.Sort(want)
	const limit = 5
	var got []string
	cursor, pages := "", 0
	for {
		page, next, err := hs.ListHeld(c.ctx(), cursor, limit)
		if err != nil {
			c.Fatalf("ListHeld page %d: %v", pages+1, err)
		}
		pages++
		if len(page) > limit {
			c.Fatalf("ListHeld returned %d messages; asked for at most %d", len(page), limit)
		}
		for _, h := range page {
			got = append(got, h.Message.ID)
		}
		if next == "" {
			break
		}
		if next == cursor || pages > len(want) {
			c.Fatalf("ListHeld does not advance: cursor %q after %d pages", next, pages)
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		c.Errorf("ListHeld paged (%d pages of %d) through %v; want every held ID once in ascending order: %v", pages, limit, got, want)
	}
	if pages < len(want)/limit {
		c.Errorf("ListHeld took %d pages for %d messages at %d a page", pages, len(want), limit)
	}
	// The page messages go: dropped without a group, they count nowhere.
	ids := make([]string, len(more))
	for i, m := range more {
		ids[i] = m.Message.ID
	}
	if dropped, err := hs.Drop(c.ctx(), append(ids, "held-twice")); err != nil || len(dropped) != len(ids)+1 {
		c.Fatalf("Drop of the paged messages = %d IDs, %v; want %d", len(dropped), err, len(ids)+1)
	}
}

// heldRelease releases the three messages of holdFirst with an ID never
// held: they come out in priority order with their group and trace
// context, the delayed one stays delayed, the group counts them once, and
// a second Release moves nothing.
func (c *C) heldRelease(d driver.Driver, hs driver.HeldStore, g string) {
	c.Helper()
	ids := []string{"held-c", "never-held", "held-b", "held-a"}
	rel, err := hs.Release(c.ctx(), ids)
	if err != nil {
		c.Fatalf("Release(%v): %v", ids, err)
	}
	slices.Sort(rel)
	if want := []string{"held-a", "held-b", "held-c"}; !slices.Equal(rel, want) {
		c.Errorf("Release(%v) = %v; want %v (an ID never held is left out)", ids, rel, want)
	}
	if left, err := hs.HeldOf(c.ctx(), ids); err != nil || len(left) != 0 {
		c.Errorf("HeldOf after Release = %d messages, %v; want none", len(left), err)
	}
	c.expectHeldGroup(d, g, driver.GroupCounters{Pushed: 3, Queued: 2, Delayed: 1}, "after Release (counted at Hold, not again)")
	if st, err := d.Stats(c.ctx()); err != nil {
		c.Errorf("stats: %v", err)
	} else if d.Capabilities().Level(driver.ExactCount) == driver.Native && st.Known.Delayed && (st.Delayed != 1 || st.Ready != 2) {
		c.Errorf("stats after Release of two messages and one delayed an hour: %+v; want Ready 2, Delayed 1", st)
	}
	c.receiveReleased(d, g)
	if again, err := hs.Release(c.ctx(), ids); err != nil || len(again) != 0 {
		c.Errorf("Release of IDs released already = %v, %v; want none and no error", again, err)
	}
}

// receiveReleased receives and completes what heldRelease released:
// held-a and held-b in priority order, with group g (where groups are
// native) and held-b's trace context (where dependencies are: an emulated
// release pushes through the driver's Push, which keeps it only where the
// engine has a place); held-c is delayed.
func (c *C) receiveReleased(d driver.Driver, g string) {
	c.Helper()
	rs, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: heldReceiveMax(d), Visibility: heldVisibility(d)})
	if err != nil {
		c.Fatalf("receive: %v", err)
	}
	var got []string
	for _, r := range rs {
		id := receivedID(r)
		got = append(got, id)
		if r.Group != g && heldGroups(d) != nil {
			c.Errorf("released task %s received with group %q; want %q", id, r.Group, g)
		}
		if id == "held-b" && r.TraceParent == "" && d.Capabilities().Level(driver.Dependencies) == driver.Native {
			c.Errorf("released task held-b received without its trace context")
		}
		if errs := d.Complete(c.ctx(), driver.Completions(r.Lease)); errs != nil && errs[0] != nil {
			c.Fatalf("complete: %v", errs[0])
		}
	}
	want := []string{"held-a", "held-b"}
	if d.Capabilities().Level(driver.DelayedPush) != driver.Native {
		// An emulated delay may let held-c be received at once.
		got = slices.DeleteFunc(got, func(id string) bool { return id == "held-c" })
	}
	if d.Capabilities().Level(driver.Priority) != driver.Native {
		slices.Sort(got)
	}
	if !slices.Equal(got, want) {
		c.Errorf("received %v after Release; want %v (priority 5 before 1; held-c delayed an hour)", got, want)
	}
}

// heldRace holds 20 messages and lets 8 goroutines release them all at
// once: each ID is reported released by one of them, and queued once.
func (c *C) heldRace(d driver.Driver, hs driver.HeldStore) {
	c.Helper()
	const n, racers = 20, 8
	var msgs []*driver.HeldMessage
	var ids []string
	for i := range n {
		id := fmt.Sprintf("held-race-%02d", i)
		msgs = append(msgs, heldMsg(id))
		ids = append(ids, id)
	}
	c.hold(hs, msgs...)
	var (
		mu    sync.Mutex
		count = map[string]int{}
		errs  []error
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for r := range racers {
		order := slices.Clone(ids)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		wg.Go(func() {
			<-start
			rel, err := hs.Release(c.ctx(), order)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			for _, id := range rel {
				count[id]++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		c.Fatalf("%d of %d concurrent Releases failed: %v", len(errs), racers, errs[0])
	}
	for _, id := range ids {
		if count[id] != 1 {
			c.Errorf("%s was reported released by %d of %d concurrent Releases; want exactly 1", id, count[id], racers)
		}
	}
	seen := map[string]int{}
	deadline := time.Now().Add(c.patience())
	for len(seen) < n && time.Now().Before(deadline) {
		rs, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: heldReceiveMax(d), Visibility: heldVisibility(d), Wait: time.Second})
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		for _, r := range rs {
			seen[receivedID(r)]++
			if errs := d.Complete(c.ctx(), driver.Completions(r.Lease)); errs != nil && errs[0] != nil {
				c.Fatalf("complete: %v", errs[0])
			}
		}
	}
	if len(seen) != n {
		c.Errorf("received %d of the %d released messages", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			c.Errorf("released message %s was received %d times; want once", id, k)
		}
	}
	c.receiveNoneDriver(d, "every released message was received and completed once")
}

// heldDrop drops two held messages, one of group g: they are gone,
// unclaimable, g counts one cancelled, and a second Drop removes nothing.
func (c *C) heldDrop(d driver.Driver, hs driver.HeldStore, g string) {
	c.Helper()
	x, y := heldMsg("held-drop-x"), heldMsg("held-drop-y")
	x.Message.Group = g
	c.hold(hs, x, y)
	c.expectHeldGroup(d, g, driver.GroupCounters{Pushed: 1}, "after Hold")
	ids := []string{"held-drop-y", "never-held", "held-drop-x"}
	dropped, err := hs.Drop(c.ctx(), ids)
	if err != nil {
		c.Fatalf("Drop(%v): %v", ids, err)
	}
	slices.Sort(dropped)
	if want := []string{"held-drop-x", "held-drop-y"}; !slices.Equal(dropped, want) {
		c.Errorf("Drop(%v) = %v; want %v", ids, dropped, want)
	}
	c.expectHeldGroup(d, g, driver.GroupCounters{Pushed: 1, Cancelled: 1}, "after Drop of its held task")
	if left, err := hs.HeldOf(c.ctx(), ids); err != nil || len(left) != 0 {
		c.Errorf("HeldOf after Drop = %d messages, %v; want none", len(left), err)
	}
	if page, next, err := hs.ListHeld(c.ctx(), "", 100); err != nil || len(page) != 0 || next != "" {
		c.Errorf("ListHeld after every held message was released or dropped = %d messages, %q, %v; want none", len(page), next, err)
	}
	c.receiveNoneDriver(d, "the held messages were dropped")
	if again, err := hs.Drop(c.ctx(), ids); err != nil || len(again) != 0 {
		c.Errorf("Drop of IDs dropped already = %v, %v; want none and no error", again, err)
	}
	if rel, err := hs.Release(c.ctx(), ids); err != nil || len(rel) != 0 {
		c.Errorf("Release of dropped IDs = %v, %v; want none and no error", rel, err)
	}
	c.expectHeldGroup(d, g, driver.GroupCounters{Pushed: 1, Cancelled: 1}, "after a second Drop and a Release of dropped IDs")
}
