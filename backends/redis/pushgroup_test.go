package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// pushGate holds the driver's first one-message push calls (the group's
// calls in flight) until open, so that the pushes after them wait in the
// group and go out together. It records the size of every call.
type pushGate struct {
	d     *Driver
	mu    sync.Mutex
	held  int
	gate  chan struct{}
	sizes []int
}

// gatePushes puts a pushGate holding the first held calls in front of d's
// push group.
func gatePushes(d *Driver, held int) *pushGate {
	g := &pushGate{d: d, held: held, gate: make(chan struct{})}
	d.pushes = newPushGroup(func(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
		g.mu.Lock()
		g.sizes = append(g.sizes, len(msgs))
		hold := len(g.sizes) <= g.held
		g.mu.Unlock()
		if hold {
			<-g.gate
		}
		return d.pushNow(ctx, msgs)
	})
	return g
}

// calls returns how many calls the group has made so far.
func (g *pushGate) calls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sizes)
}

// largest returns the most messages one call carried, and the size of
// every call.
func (g *pushGate) largest() (int, []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Max(g.sizes), slices.Clone(g.sizes)
}

// pushOutcome is what one caller of Push got.
type pushOutcome struct {
	id  string
	res []driver.PushResult
	err error
}

// pushAll starts one Push per message, all at once, and returns their
// outcomes as they arrive.
func pushAll(ctx context.Context, d *Driver, msgs []*driver.Message) chan pushOutcome {
	out := make(chan pushOutcome, len(msgs))
	for _, m := range msgs {
		go func() {
			res, err := d.Push(ctx, []*driver.Message{m})
			out <- pushOutcome{m.ID, res, err}
		}()
	}
	return out
}

// untilWaiting waits until n pushes wait in d's push group.
func untilWaiting(t *testing.T, d *Driver, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); d.pushes.Waiting() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d pushes wait in the group, want %d", d.pushes.Waiting(), n)
		}
	}
}

// holdFlight fills d's push group with held calls, one per place in
// flight (tasks held0, held1, ...), and returns once they are all held at
// the gate, so that the pushes after them wait in the group. The held
// pushes' outcomes arrive on out once the gate opens.
func holdFlight(t *testing.T, ctx context.Context, d *Driver) (gate *pushGate, held []*driver.Message, out chan pushOutcome) {
	t.Helper()
	gate = gatePushes(d, pushFlight)
	for i := range pushFlight {
		held = append(held, msg(fmt.Sprint("held", i), 0))
	}
	out = pushAll(ctx, d, held)
	for deadline := time.Now().Add(10 * time.Second); gate.calls() < pushFlight; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls held, want %d", gate.calls(), pushFlight)
		}
	}
	return gate, held, out
}

// TestConcurrentPushesStoredOnce: many goroutines push one task each; the
// pushes that wait share script calls, and every task is stored exactly
// once, each caller getting its own message id.
func TestConcurrentPushesStoredOnce(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	const n = 300
	gate := gatePushes(d, pushFlight)
	msgs := make([]*driver.Message, n)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("t%03d", i), 0)
	}
	out := pushAll(ctx, d, msgs)
	untilWaiting(t, d, n-pushFlight)
	close(gate.gate)
	mids := map[string]string{}
	for range n {
		o := <-out
		if o.err != nil || len(o.res) != 1 || o.res[0].Duplicate || o.res[0].MessageID == "" {
			t.Fatalf("push %s: %+v, %v", o.id, o.res, o.err)
		}
		if other, ok := mids[o.res[0].MessageID]; ok {
			t.Fatalf("pushes %s and %s got one message id, %s", o.id, other, o.res[0].MessageID)
		}
		mids[o.res[0].MessageID] = o.id
	}
	if most, sizes := gate.largest(); most < 2 {
		t.Fatalf("no call carried more than one push (calls of %v)", sizes)
	}
	if s := stats(t, d); s.Ready != n {
		t.Fatalf("ready %d, want %d", s.Ready, n)
	}
	got := map[string]int{}
	for _, r := range receive(t, d, 1000, time.Minute) {
		got[r.ID]++
		if mids[r.Lease.MessageID] != r.ID || string(r.Body) != "body-"+r.ID {
			t.Errorf("received %s (message %s, body %q); its push got message %s", r.ID, r.Lease.MessageID, r.Body, mids[r.Lease.MessageID])
		}
	}
	for _, m := range msgs {
		if got[m.ID] != 1 {
			t.Errorf("task %s received %d times", m.ID, got[m.ID])
		}
	}
}

// TestSameIDPushedConcurrently: pushes of one task ID that share a call
// behave as if sent one after the other: one stores it, the others are its
// duplicates.
func TestSameIDPushedConcurrently(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	// The calls in flight hold unrelated tasks; the ten pushes of "same"
	// wait and go together.
	gate, msgs, out := holdFlight(t, ctx, d)
	same := make([]*driver.Message, 10)
	for i := range same {
		same[i] = msg("same", 0)
	}
	sameOut := pushAll(ctx, d, same)
	untilWaiting(t, d, len(same))
	close(gate.gate)
	for range msgs {
		if o := <-out; o.err != nil {
			t.Fatal(o.err)
		}
	}
	stored, mid := 0, ""
	for range same {
		o := <-sameOut
		if o.err != nil {
			t.Fatal(o.err)
		}
		if !o.res[0].Duplicate {
			stored++
		}
		if mid != "" && o.res[0].MessageID != mid {
			t.Fatalf("pushes of one ID got message ids %s and %s", mid, o.res[0].MessageID)
		}
		mid = o.res[0].MessageID
	}
	if most, sizes := gate.largest(); stored != 1 || most != len(same) {
		t.Fatalf("%d of %d pushes stored the task (calls of %v); want 1, in one call", stored, len(same), sizes)
	}
	if s := stats(t, d); s.Ready != pushFlight+1 {
		t.Fatalf("ready %d, want %d", s.Ready, pushFlight+1)
	}
}

// TestCanceledWaitingPushNotStored: a push whose context ends while it
// waits for a call fails with the context's error, and its task is not
// stored.
func TestCanceledWaitingPushNotStored(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	gate, msgs, out := holdFlight(t, ctx, d)
	// The canceled push waits between two others, which go on together.
	first := pushAll(ctx, d, []*driver.Message{msg("first", 0)})
	untilWaiting(t, d, 1)
	cctx, cancel := context.WithCancel(ctx)
	canceled := pushAll(cctx, d, []*driver.Message{msg("canceled", 0)})
	untilWaiting(t, d, 2)
	last := pushAll(ctx, d, []*driver.Message{msg("last", 0)})
	untilWaiting(t, d, 3)
	cancel()
	o := <-canceled
	wantCode(t, "push canceled while waiting", o.err, errcode.Canceled)
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("push canceled while waiting: %v does not wrap context.Canceled", o.err)
	}
	close(gate.gate)
	for range msgs {
		if o := <-out; o.err != nil {
			t.Fatal(o.err)
		}
	}
	for _, c := range []chan pushOutcome{first, last} {
		if o := <-c; o.err != nil {
			t.Fatal(o.err)
		}
	}
	if most, sizes := gate.largest(); most != 2 {
		t.Fatalf("calls of %v, want the two waiting pushes in one", sizes)
	}
	if s := stats(t, d); s.Ready != pushFlight+2 {
		t.Fatalf("ready %d, want %d: the held pushes and the two waiting with the canceled one", s.Ready, pushFlight+2)
	}
	if res := push(t, d, msg("canceled", 0)); res[0].Duplicate {
		t.Fatal("the canceled push's task was stored")
	}
}

// TestMaxDepthRefusalPerCaller: when a call of waiting pushes does not fit
// a max-depth policy, each push gets what it would have got alone: those
// that fit are stored, the rest are refused.
func TestMaxDepthRefusalPerCaller(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 6}); err != nil {
		t.Fatal(err)
	}
	push(t, d, msg("before", 0))
	gate := gatePushes(d, pushFlight)
	var msgs []*driver.Message
	for i := range 14 {
		msgs = append(msgs, msg(fmt.Sprint("t", i), 0))
	}
	// A push of "before", already queued, is a duplicate, not refused.
	msgs = append(msgs, msg("before", 0))
	out := pushAll(ctx, d, msgs)
	untilWaiting(t, d, len(msgs)-pushFlight)
	close(gate.gate)
	var stored, dups, refused int
	for range msgs {
		o := <-out
		var qf *driver.QueueFullError
		switch {
		case o.err == nil && o.res[0].Duplicate:
			dups++
			if o.id != "before" {
				t.Errorf("push %s: a duplicate", o.id)
			}
		case o.err == nil:
			stored++
		case errors.As(o.err, &qf):
			wantCode(t, "refused push", o.err, errcode.ResourceExhausted)
			refused++
		default:
			t.Fatalf("push %s: %v", o.id, o.err)
		}
	}
	if _, sizes := gate.largest(); stored != 5 || dups != 1 || refused != 9 {
		t.Fatalf("stored %d, duplicates %d, refused %d; want 5, 1, 9 (calls of %v)", stored, dups, refused, sizes)
	}
	if s := stats(t, d); s.Ready != 6 {
		t.Fatalf("ready %d, want 6", s.Ready)
	}
}

// TestPushesSharingACallWakeReceivers: a call of several pushes announces
// them all: as many waiting receivers wake.
func TestPushesSharingACallWakeReceivers(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	const receivers = pushFlight + 4
	got := make(chan []*driver.Received, receivers)
	for range receivers {
		go func() {
			recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 20 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- recs
		}()
	}
	for d.wake.Waiters() < receivers {
		time.Sleep(5 * time.Millisecond)
	}
	gate := gatePushes(d, pushFlight)
	var msgs []*driver.Message
	for i := range receivers {
		msgs = append(msgs, msg(fmt.Sprint(i), 0))
	}
	out := pushAll(ctx, d, msgs)
	untilWaiting(t, d, receivers-pushFlight)
	close(gate.gate)
	for range msgs {
		if o := <-out; o.err != nil {
			t.Fatal(o.err)
		}
	}
	seen := map[string]bool{}
	for range receivers {
		recs := <-got
		if len(recs) != 1 {
			t.Fatalf("a receiver got %d messages, want 1", len(recs))
		}
		seen[recs[0].ID] = true
	}
	if most, sizes := gate.largest(); len(seen) != receivers || most != receivers-pushFlight {
		t.Fatalf("receivers got %v (calls of %v)", seen, sizes)
	}
}

// TestPushesSharingACallKeepTheirFields: each push of a shared call keeps
// its own priority, delay and trace context, whatever the others carry.
func TestPushesSharingACallKeepTheirFields(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	gate, held, out := holdFlight(t, ctx, d)
	const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	shared := []*driver.Message{
		msg("plain", 0),
		{ID: "traced", Body: []byte("body-traced"), TraceParent: trace},
		msg("urgent", 9),
		{ID: "later", Body: []byte("body-later"), NotBefore: time.Now().Add(time.Hour)},
	}
	sharedOut := pushAll(ctx, d, shared)
	untilWaiting(t, d, len(shared))
	close(gate.gate)
	for range len(held) + len(shared) {
		var o pushOutcome
		select {
		case o = <-out:
		case o = <-sharedOut:
		}
		if o.err != nil {
			t.Fatalf("push %s: %v", o.id, o.err)
		}
	}
	if most, sizes := gate.largest(); most != len(shared) {
		t.Fatalf("calls of %v, want the %d waiting pushes in one", sizes, len(shared))
	}
	recs := receive(t, d, 100, time.Minute)
	if len(recs) != pushFlight+3 || recs[0].ID != "urgent" {
		t.Fatalf("received %d messages, first %v; want %d ready, urgent first", len(recs), recs, pushFlight+3)
	}
	for _, r := range recs {
		want := ""
		if r.ID == "traced" {
			want = trace
		}
		if r.TraceParent != want || string(r.Body) != "body-"+r.ID {
			t.Errorf("%s: trace context %q, body %q", r.ID, r.TraceParent, r.Body)
		}
	}
	if s := stats(t, d); s.Delayed != 1 {
		t.Fatalf("delayed %d, want 1", s.Delayed)
	}
}
