package confsuite

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// policyChecks are the checks of queue policies (docs/policies.md) and of
// the attempt history.
func policyChecks() []check {
	return []check{
		{"PolicyValidation", checkPolicyValidation},
		{"ConcurrencyCap", checkConcurrencyCap},
		{"RateLimit", checkRateLimit},
		{"MaxDepth", checkMaxDepth},
		{"AttemptHistory", checkAttemptHistory},
	}
}

// hasPolicyStore reports whether the backend keeps policies, by asking it
// to list them: Unimplemented means it keeps none.
func (c *C) hasPolicyStore(q *handle) bool {
	c.Helper()
	_, err := q.Admin().Policies(c.ctx())
	switch {
	case err == nil:
		return true
	case errcode.Of(err) == errcode.Unimplemented:
		return false
	}
	c.Fatalf("policy list: %v", err)
	return false
}

// needPolicyStore returns when the backend keeps policies, and otherwise
// skips the check, which needs what.
func (c *C) needPolicyStore(q *handle, what string) {
	c.Helper()
	if !c.hasPolicyStore(q) {
		c.skipNeeds("driver.PolicyStore", "Admin.Policies is Unimplemented: the backend keeps no queue policies, so "+what+" cannot be set")
	}
}

// checkPolicyValidation: invalid policies are InvalidArgument on every
// backend; where policies are kept, set, list and unset round-trip.
func checkPolicyValidation(c *C) {
	q := c.open()
	bad := []driver.Policy{
		{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 0},
		{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: -1},
		{Kind: driver.ConcurrencyPolicy, Limit: 1},
		{Kind: driver.RatePolicy, Key: "k", Limit: 1},
		{Kind: driver.RatePolicy, Key: "k", Limit: 1, Period: -time.Second},
		{Kind: driver.RatePolicy, Key: "k", Limit: 1, Period: time.Duration(1<<63 - 1)},
		{Kind: driver.MaxDepthPolicy, Limit: 0},
		{Kind: driver.MaxDepthPolicy, Key: "k", Limit: 3},
		{Kind: "priority", Key: "k", Limit: 1},
	}
	for _, p := range bad {
		c.expectCode(q.Admin().SetPolicy(c.ctx(), p), errcode.InvalidArgument, fmt.Sprintf("set invalid policy %+v", p))
	}
	if !c.hasPolicyStore(q) {
		err := q.Admin().SetPolicy(c.ctx(), driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 10})
		c.expectCode(err, errcode.Unimplemented, "set a policy on a backend that keeps none")
		c.needPolicyStore(q, "policies")
	}
	want := []driver.Policy{{Kind: driver.MaxDepthPolicy, Limit: 10}}
	if err := q.Admin().SetPolicy(c.ctx(), want[0]); errcode.Of(err) == errcode.Unimplemented {
		c.Logf("the backend keeps policies but refuses max-depth: %v", err)
		want = nil
	}
	if level(q, driver.ConcurrencyLimit) != driver.Unsupported {
		want = append([]driver.Policy{{Kind: driver.ConcurrencyPolicy, Key: "gpu", Limit: 2}}, want...)
	} else {
		err := q.Admin().SetPolicy(c.ctx(), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpu", Limit: 2})
		c.expectCode(err, errcode.Unimplemented, "set a concurrency policy where concurrency-limit is unsupported")
	}
	if level(q, driver.RateLimit) != driver.Unsupported {
		rate := driver.Policy{Kind: driver.RatePolicy, Key: "api", Limit: 10, Period: time.Minute}
		want = append(want, rate)
		driver.SortPolicies(want)
	}
	if len(want) == 0 {
		c.Skipf("the backend keeps policies but supports no kind of them")
	}
	for _, p := range want {
		if err := q.Admin().SetPolicy(c.ctx(), p); err != nil {
			c.Fatalf("set %v: %v", p, err)
		}
	}
	// Setting again replaces.
	want[0].Limit++
	if err := q.Admin().SetPolicy(c.ctx(), want[0]); err != nil {
		c.Fatalf("set %v again: %v", want[0], err)
	}
	got, err := q.Admin().Policies(c.ctx())
	if err != nil {
		c.Fatalf("policy list: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		c.Errorf("policy list = %v, want %v (sorted by kind, then key)", got, want)
	}
	for _, p := range want {
		if ok, err := q.Admin().UnsetPolicy(c.ctx(), p.Kind, p.Key); err != nil || !ok {
			c.Errorf("unset %v: %v, %v; want true, nil", p, ok, err)
		}
	}
	if ok, err := q.Admin().UnsetPolicy(c.ctx(), driver.RatePolicy, "never-set"); err != nil || ok {
		c.Errorf("unset a missing policy: %v, %v; want false, nil", ok, err)
	}
	if got, err := q.Admin().Policies(c.ctx()); err != nil || len(got) != 0 {
		c.Errorf("policy list after unsetting all = %v, %v; want none", got, err)
	}
}

// checkKeyLevel handles a policy feature that is not native: unsupported
// refuses keyed pushes with Unimplemented; emulated accepts them (the worker
// enforces per process), warning once. It returns true when the caller
// should stop.
func (c *C) checkKeyLevel(q *handle, f driver.Feature, t *jobq.Task) bool {
	c.Helper()
	switch level(q, f) {
	case driver.Unsupported:
		_, err := q.Push(c.ctx(), t)
		c.expectCode(err, errcode.Unimplemented, "push a task with a key where "+string(f)+" is unsupported")
		c.receiveNone(q, time.Time{}, "the keyed push failed")
		c.skipNeeds("driver.PolicyStore with feature "+string(f), string(f)+" is unsupported: "+q.Capabilities().Features[f].Fallback)
		return true
	case driver.Emulated:
		c.push(q, t)
		e := c.receive(q, c.longVis(q))
		c.complete(e)
		if n := len(q.logs.warnings(string(f))); n != 1 {
			c.Errorf("emulated %s: %d degradation warnings after a keyed push, want 1", f, n)
		}
		return true
	}
	return false
}

// capK, capReceivers and capPerKey shape checkConcurrencyCap: the cap on
// key "capped", the receivers of its concurrent part, and the tasks pushed
// per key.
const capK, capReceivers, capPerKey = 2, 4, 6

// keyedTask is a distinct task with concurrency key key.
func keyedTask(name, key string) *jobq.Task {
	t := task(name)
	t.ConcurrencyKey = key
	return t
}

// checkConcurrencyCap: with cap K on a key, N receivers never hold more
// than K messages with that key, and other keys keep flowing.
func checkConcurrencyCap(c *C) {
	q := c.open()
	if c.checkKeyLevel(q, driver.ConcurrencyLimit, keyedTask("unsupported key", "k")) {
		return
	}
	c.needPolicyStore(q, "a concurrency cap")
	if err := q.Admin().SetPolicy(c.ctx(), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "capped", Limit: capK}); err != nil {
		c.Fatalf("set concurrency policy: %v", err)
	}
	// Capped tasks first: a claim must skip them, not stop at them.
	for i := range capPerKey {
		c.push(q, keyedTask(fmt.Sprintf("capped %d", i), "capped"))
	}
	for i := range capPerKey {
		c.push(q, keyedTask(fmt.Sprintf("free %d", i), "free"))
	}
	held := c.capHoldAll(q)
	c.capKeyStats(q)
	c.capCompletionFrees(q, held)
	c.capConcurrent(q)
}

// capHoldAll, the deterministic part: holding everything claimable gives
// the cap's worth of capped tasks and every free one.
func (c *C) capHoldAll(q *handle) []*jobq.Envelope {
	var held []*jobq.Envelope
	for len(held) <= 2*capPerKey {
		e, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.longVis(q)})
		if errors.Is(err, jobq.ErrEmpty) {
			break
		}
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		held = append(held, e)
	}
	counts := map[string]int{}
	for _, e := range held {
		counts[e.Task.ConcurrencyKey]++
	}
	if counts["capped"] != capK || counts["free"] != capPerKey {
		c.Errorf("holding every claimable message gave %v; want capped=%d (the cap) and free=%d (an uncapped key flows past the capped one)", counts, capK, capPerKey)
	}
	return held
}

// capKeyStats: where the claim honours the cap, the per-key report agrees
// with it.
func (c *C) capKeyStats(q *handle) {
	if q.Capabilities().Level(driver.ConcurrencyLimit) != driver.Native {
		return
	}
	ks, err := q.Admin().PolicyKeyStats(c.ctx())
	if err != nil {
		c.Fatalf("key stats: %v", err)
	}
	for _, k := range ks {
		if k.Kind == driver.ConcurrencyPolicy && k.Key == "capped" {
			if k.InFlight != capK {
				c.Errorf("key stats report %d in flight for key \"capped\"; %d are held", k.InFlight, capK)
			}
			return
		}
	}
	c.Errorf("key stats %+v lack the concurrency key \"capped\" that has a policy", ks)
}

// capCompletionFrees: completing a capped task frees a slot for the next
// one. It completes everything held.
func (c *C) capCompletionFrees(q *handle, held []*jobq.Envelope) {
	for i, e := range held {
		if e.Task.ConcurrencyKey == "capped" {
			c.complete(e)
			held = append(held[:i], held[i+1:]...)
			break
		}
	}
	e := c.receive(q, c.longVis(q))
	if e.Task.ConcurrencyKey != "capped" {
		c.Errorf("after completing a capped task, received key %q; want another capped task", e.Task.ConcurrencyKey)
	}
	for _, e := range append(held, e) {
		c.complete(e)
	}
}

// capConcurrent, the concurrent part: receivers working through a fresh
// batch never hold more than the cap at once, and deliver every task.
func (c *C) capConcurrent(q *handle) {
	for i := range capPerKey {
		c.push(q, keyedTask(fmt.Sprintf("capped again %d", i), "capped"))
	}
	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(c.patience())
	for range capReceivers {
		wg.Go(func() { c.capReceiver(q, deadline, &inFlight, &peak) })
	}
	wg.Wait()
	if p := peak.Load(); p > capK {
		c.Errorf("%d receivers held %d messages with key \"capped\" at once; the cap is %d", capReceivers, p, capK)
	}
	if size, err := q.Admin().Size(c.ctx()); err != nil || size != 0 {
		c.Errorf("after the receivers finished, %d messages are left (%v); every task must be delivered", size, err)
	}
}

// capReceiver receives and completes until the queue is empty or the
// deadline passes, counting the capped tasks it holds in inFlight and the
// most seen at once in peak.
func (c *C) capReceiver(q *handle, deadline time.Time, inFlight, peak *atomic.Int64) {
	for time.Now().Before(deadline) && c.ctx().Err() == nil {
		e, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: 200 * time.Millisecond})
		if errors.Is(err, jobq.ErrEmpty) {
			if st, err := q.Admin().Stats(c.ctx()); err == nil && st.Ready+st.InFlight+st.Delayed == 0 {
				return
			}
			continue
		}
		if err != nil {
			c.Errorf("receive: %v", err)
			return
		}
		// Counted after the claim and before the settlement, so the
		// observed count never exceeds the real one.
		if e.Task.ConcurrencyKey == "capped" {
			now := inFlight.Add(1)
			for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			inFlight.Add(-1)
		}
		if err := e.Complete(c.ctx()); err != nil {
			c.Errorf("complete: %v", err)
			return
		}
	}
}

// checkRateLimit: with COUNT/PERIOD on a key, no window of PERIOD holds
// more than COUNT claims of that key, and other tasks flow meanwhile.
func checkRateLimit(c *C) {
	q := c.open()
	keyed := func(name string) *jobq.Task {
		t := task(name)
		t.RateLimitKey = "limited"
		return t
	}
	if c.checkKeyLevel(q, driver.RateLimit, keyed("unsupported key")) {
		return
	}
	c.needPolicyStore(q, "a rate limit")
	const count, total = 3, 7
	period := 2 * time.Second
	if err := q.Admin().SetPolicy(c.ctx(), driver.Policy{Kind: driver.RatePolicy, Key: "limited", Limit: count, Period: period}); err != nil {
		c.Fatalf("set rate policy: %v", err)
	}
	for i := range total {
		c.push(q, keyed(fmt.Sprintf("rate %d", i)))
	}
	c.push(q, task("rate unkeyed"))

	type claim struct{ start, end time.Time }
	var claims []claim
	var sawUnkeyed bool
	deadline := time.Now().Add(c.patience() + period*time.Duration(total/count+1))
	for len(claims) < total && time.Now().Before(deadline) {
		start := time.Now()
		e, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: period})
		end := time.Now()
		if errors.Is(err, jobq.ErrEmpty) {
			continue
		}
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		if e.Task.RateLimitKey == "limited" {
			claims = append(claims, claim{start, end})
		} else {
			sawUnkeyed = true
			if len(claims) < count {
				c.Logf("the unkeyed task came before the window filled; it cannot show that it flows past a limited key")
			}
		}
		c.complete(e)
	}
	if len(claims) != total {
		c.Fatalf("received %d of %d rate-limited tasks within %v", len(claims), total, time.Until(deadline))
	}
	if !sawUnkeyed {
		e := c.receive(q, c.longVis(q))
		c.complete(e)
	}
	// Claim i+count happened at least a period after claim i. Each claim
	// happened between its call's start and end, so end(i+count) -
	// start(i) bounds the gap from above; allow for clock skew.
	for i := 0; i+count < len(claims); i++ {
		if gap := claims[i+count].end.Sub(claims[i].start); gap < period-c.tolerance() {
			c.Errorf("claims %d and %d of key \"limited\" were at most %v apart; with %d per %v, %d claims fit in no window", i+1, i+count+1, gap, count, period, count+1)
		}
	}
}

// checkMaxDepth: a push that would exceed max-depth fails with
// ResourceExhausted carrying the depth, batches are all-or-nothing, and a
// completion makes room.
func checkMaxDepth(c *C) {
	q := c.open()
	c.needPolicyStore(q, "max-depth")
	const depth = 3
	if err := q.Admin().SetPolicy(c.ctx(), driver.Policy{Kind: driver.MaxDepthPolicy, Limit: depth}); errcode.Of(err) == errcode.Unimplemented {
		c.skipNeeds("a driver.PolicyStore that enforces max-depth", "SetPolicy(max-depth) is Unimplemented: "+err.Error())
	} else if err != nil {
		c.Fatalf("set max-depth: %v", err)
	}
	c.push(q, task("depth 1"))
	if _, err := q.PushBatch(c.ctx(), []*jobq.Task{task("depth 2"), task("depth 3"), task("depth 4")}, jobq.PushOptions{}); err == nil {
		c.Errorf("a batch of 3 onto a queue of 1 with max-depth %d was accepted", depth)
	} else {
		c.expectCode(err, errcode.ResourceExhausted, "batch push beyond max-depth")
	}
	if size, err := q.Admin().Size(c.ctx()); err != nil || (level(q, driver.ExactCount) == driver.Native && size != 1) {
		c.Errorf("after a refused batch the queue holds %d (%v); want 1: a batch is all-or-nothing against max-depth", size, err)
	}
	c.push(q, task("depth 2"), task("depth 3"))
	_, err := q.Push(c.ctx(), task("depth 4"))
	c.expectCode(err, errcode.ResourceExhausted, "push onto a full queue")
	var qf *driver.QueueFullError
	if !errors.As(err, &qf) {
		c.Errorf("a push onto a full queue returned %v; want an error wrapping *driver.QueueFullError with the depth", err)
	} else if qf.Depth != depth || qf.MaxDepth != depth {
		c.Errorf("QueueFullError = %+v; want Depth %d, MaxDepth %d", qf, depth, depth)
	}
	// In flight still counts; a completion makes room.
	e := c.receive(q, c.longVis(q))
	_, err = q.Push(c.ctx(), task("depth 4"))
	c.expectCode(err, errcode.ResourceExhausted, "push while the queue is full with one task in flight")
	c.complete(e)
	c.push(q, task("depth 4"))
	if _, err := q.Admin().UnsetPolicy(c.ctx(), driver.MaxDepthPolicy, ""); err != nil {
		c.Fatalf("unset max-depth: %v", err)
	}
	c.push(q, task("depth 5"))
}
