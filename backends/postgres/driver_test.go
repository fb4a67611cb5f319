package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// receive claims up to max messages without waiting.
func receive(t *testing.T, d *Driver, max int, vis time.Duration) []*driver.Received {
	t.Helper()
	got, err := d.Receive(ctxT(t), driver.ReceiveParams{Max: max, Visibility: vis})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return got
}

func ids(rs []*driver.Received) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func TestClaimOrderAndLimit(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	msgs := []*driver.Message{
		{ID: "low", Body: []byte("1"), Priority: -5},
		{ID: "mid1", Body: []byte("2")},
		{ID: "high", Body: []byte("3"), Priority: 1000},
		{ID: "mid2", Body: []byte("4")},
		{ID: "later", Body: []byte("5"), Priority: 1000, NotBefore: time.Now().Add(time.Hour)},
	}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		max  int
		want []string
	}{
		{2, []string{"high", "mid1"}},
		{1, []string{"mid2"}},
		{5, []string{"low"}},
		{5, []string{}},
	}
	for _, tt := range tests {
		got := ids(receive(t, d, tt.max, time.Minute))
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Fatalf("receive(max=%d) = %v, want %v", tt.max, got, tt.want)
		}
	}
}

func TestDedup(t *testing.T) {
	t.Parallel()
	for _, syncPush := range []string{"true", "false"} {
		t.Run("sync_push="+syncPush, func(t *testing.T) {
			t.Parallel()
			testDedup(t, openDriver(t, "sync_push="+syncPush))
		})
	}
}

func testDedup(t *testing.T, d *Driver) {
	ctx := ctxT(t)
	res, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b"), msg("a")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[2].MessageID != res[0].MessageID {
		t.Fatalf("push a, b, a = %+v; want the second a reported as a duplicate of the first", res)
	}
	res, err = d.Push(ctx, []*driver.Message{msg("a")})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].MessageID == "" {
		t.Fatalf("push of a queued task = %+v, want Duplicate with the queued message's id", res[0])
	}
	// Once completed, the same task id can be queued again.
	got := receive(t, d, 10, time.Minute)
	for _, r := range got {
		if errs := d.Complete(ctx, driver.Completions(r.Lease)); errs != nil {
			t.Fatal(errs)
		}
	}
	res, err = d.Push(ctx, []*driver.Message{msg("a")})
	if err != nil || res[0].Duplicate {
		t.Fatalf("push after completion = %+v, %v; want a new message", res, err)
	}
}

func TestFencedLeases(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	old := receive(t, d, 1, 50*time.Millisecond)[0]
	// Wait for the lease to expire, then claim the message again.
	var cur *driver.Received
	for cur == nil {
		time.Sleep(20 * time.Millisecond)
		if got := receive(t, d, 1, time.Minute); len(got) == 1 {
			cur = got[0]
		}
	}
	if cur.Lease.Token == old.Lease.Token || cur.DeliveryCount != 2 {
		t.Fatalf("re-claim: token %s (old %s), delivery %d; want a fresh token and delivery 2", cur.Lease.Token, old.Lease.Token, cur.DeliveryCount)
	}
	ops := map[string]func() error{
		"renew": func() error { _, err := d.Renew(ctx, old.Lease, time.Hour); return err },
		"complete": func() error {
			return first(d.Complete(ctx, driver.Completions(old.Lease)))
		},
		"requeue": func() error {
			return first(d.Requeue(ctx, []driver.RequeueParams{{Lease: old.Lease}}))
		},
		"dead-letter": func() error {
			return first(d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: old.Lease, Reason: "x"}}))
		},
	}
	for name, op := range ops {
		if err := op(); errcode.Of(err) != errcode.LockLost {
			t.Errorf("%s with the stale lease: %v, want LockLost", name, err)
		}
	}
	// The new holder is untouched: it can renew and complete.
	if _, err := d.Renew(ctx, cur.Lease, time.Minute); err != nil {
		t.Fatalf("renew by the holder: %v", err)
	}
	if errs := d.Complete(ctx, driver.Completions(cur.Lease)); errs != nil {
		t.Fatalf("complete by the holder: %v", errs)
	}
	if errs := d.Complete(ctx, driver.Completions(cur.Lease)); errcode.Of(first(errs)) != errcode.LockLost {
		t.Fatalf("second complete: %v, want LockLost", errs)
	}
}

func first(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestCompleteBatchReportsEachLease(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b"), msg("c")}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, d, 3, time.Minute)
	stale := got[1].Lease
	stale.Token = leaseToken("00000000-0000-0000-0000-000000000000", 0)
	malformed := got[2].Lease
	malformed.MessageID = "not-a-number"
	errs := d.Complete(ctx, driver.Completions(got[0].Lease, stale, malformed, got[0].Lease))
	want := []errcode.Code{errcode.Unknown, errcode.LockLost, errcode.InvalidArgument, errcode.LockLost}
	if len(errs) != len(want) {
		t.Fatalf("complete returned %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i, err := range errs {
		if (err == nil) != (want[i] == errcode.Unknown) || (err != nil && errcode.Of(err) != want[i]) {
			t.Errorf("lease %d: %v, want code %v", i, err, want[i])
		}
	}
	st, err := d.Stats(ctx)
	if err != nil || st.InFlight != 2 {
		t.Fatalf("stats after a partial batch = %+v, %v; want 2 in flight", st, err)
	}
}

func TestRequeueDelayAndBody(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	r := receive(t, d, 1, time.Minute)[0]
	delay := 300 * time.Millisecond
	requeued := time.Now()
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: r.Lease, Delay: delay, Body: []byte("new")}}); errs != nil {
		t.Fatal(errs)
	}
	if got := receive(t, d, 1, time.Minute); len(got) != 0 {
		t.Fatalf("message visible during its requeue delay")
	}
	st, err := d.Stats(ctx)
	if err != nil || st.Delayed != 1 {
		t.Fatalf("stats = %+v, %v; want 1 delayed", st, err)
	}
	// A waiting receiver wakes when the delay ends, not at the poll interval.
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 30 * time.Second})
	if err != nil || len(got) != 1 {
		t.Fatalf("receive after the delay: %v, %v", got, err)
	}
	if time.Since(requeued) < delay {
		t.Errorf("message came back after %v, before its %v delay", time.Since(requeued), delay)
	}
	if string(got[0].Body) != "new" || got[0].DeliveryCount != 2 {
		t.Errorf("requeued message: body %q delivery %d, want body \"new\" delivery 2", got[0].Body, got[0].DeliveryCount)
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b")}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, d, 2, time.Minute)
	errs := d.DeadLetter(ctx, []driver.DeadLetterParams{
		{Lease: got[0].Lease, Reason: "exit status 1", Detail: "tail of output"},
		{Lease: got[1].Lease, Reason: "poison"},
	})
	if errs != nil {
		t.Fatal(errs)
	}
	dead, err := d.ListDead(ctx, 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("list dead = %v, %v; want 2", dead, err)
	}
	a := dead[0]
	if a.ID != "a" || a.Reason != "exit status 1" || a.Detail != "tail of output" || a.DeliveryCount != 1 ||
		a.DeadAt.IsZero() || string(a.Body) != string(msg("a").Body) {
		t.Errorf("dead letter = %+v", a)
	}
	if st, _ := d.Stats(ctx); st.Dead != 2 || st.Ready+st.InFlight+st.Delayed != 0 {
		t.Errorf("stats = %+v, want 2 dead and nothing else", st)
	}
	n, err := d.RequeueDead(ctx, []string{a.MessageID, "999999999999", "junk"})
	if err != nil || n != 1 {
		t.Fatalf("requeue dead = %d, %v; want 1", n, err)
	}
	back := receive(t, d, 10, time.Minute)
	if fmt.Sprint(ids(back)) != "[a]" || back[0].DeliveryCount != 2 {
		t.Fatalf("after requeue: %v (delivery %d), want [a] at delivery 2 (the count goes on)", ids(back), back[0].DeliveryCount)
	}
	n, err = d.PurgeDead(ctx, nil)
	if err != nil || n != 1 {
		t.Fatalf("purge all = %d, %v; want 1", n, err)
	}
}

func TestPeekStatsClear(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	msgs := []*driver.Message{msg("ready"), msg("leased"), {ID: "delayed", Body: []byte("x"), NotBefore: time.Now().Add(time.Hour)}}
	msgs[1].Priority = 10
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	receive(t, d, 1, time.Minute) // claims "leased", the higher priority
	peeked, err := d.Peek(ctx, 10)
	if err != nil || len(peeked) != 3 {
		t.Fatalf("peek = %v, %v", peeked, err)
	}
	if peeked[0].ID != "ready" || peeked[0].InFlight || !peeked[1].InFlight && !peeked[2].InFlight {
		t.Errorf("peek order/in-flight: %+v %+v %+v", peeked[0], peeked[1], peeked[2])
	}
	st, err := d.Stats(ctx)
	want := driver.Stats{Ready: 1, InFlight: 1, Delayed: 1, Known: driver.KnownCounts{Ready: true, InFlight: true, Delayed: true, Dead: true}}
	if err != nil || st != want {
		t.Fatalf("stats = %+v, %v; want %+v", st, err, want)
	}
	n, err := d.Clear(ctx)
	if err != nil || n != 3 {
		t.Fatalf("clear = %d, %v; want 3", n, err)
	}
}

func TestPriorityRangeIsChecked(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	_, err := d.Push(ctxT(t), []*driver.Message{{ID: "x", Body: []byte("x"), Priority: 5000}})
	if errcode.Of(err) != errcode.InvalidArgument {
		t.Fatalf("push with priority 5000: %v, want InvalidArgument from the CHECK constraint", err)
	}
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	d := openDriver(t, "max_message_bytes=10")
	_, err := d.Push(ctxT(t), []*driver.Message{{ID: "x", Body: make([]byte, 11)}})
	if errcode.Of(err) != errcode.TooLarge {
		t.Fatalf("push of 11 bytes with a 10-byte limit: %v, want TooLarge", err)
	}
}

// TestConcurrentClaimsNeverOverlap has many receivers drain one queue at
// once; every message must be claimed exactly once.
func TestConcurrentClaimsNeverOverlap(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	const n = 2000
	msgs := make([]*driver.Message, n)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprint(i))
	}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				got, err := d.Receive(ctx, driver.ReceiveParams{Max: 7, Visibility: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				if len(got) > 7 {
					t.Errorf("claimed %d, asked for at most 7", len(got))
				}
				leases := make([]driver.Lease, len(got))
				mu.Lock()
				for i, r := range got {
					seen[r.ID]++
					leases[i] = r.Lease
				}
				mu.Unlock()
				if errs := d.Complete(ctx, driver.Completions(leases...)); errs != nil {
					t.Error(errs)
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d distinct messages claimed, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("message %s claimed %d times", id, c)
		}
	}
}

// TestNotifyWakesOtherProcess: a receiver that would poll only once an
// hour still gets a message pushed through another connection pool at once,
// which only the LISTEN/NOTIFY path can explain.
func TestNotifyWakesOtherProcess(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	consumer := openURL(t, raw)
	producer := openURL(t, raw)
	ctx := ctxT(t)
	got := make(chan []*driver.Received, 1)
	go func() {
		// Neither the wait nor the poll interval can end this receive before
		// the 30s context does: only a notification can.
		rs, err := consumer.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
		if err != nil {
			t.Errorf("receive was not woken by the push: %v", err)
		}
		got <- rs
	}()
	// Give the receiver time to go idle, so the push must wake it.
	time.Sleep(200 * time.Millisecond)
	if _, err := producer.Push(ctx, []*driver.Message{msg("wake")}); err != nil {
		t.Fatal(err)
	}
	if rs := <-got; len(rs) != 1 {
		t.Fatalf("idle receiver got %d messages, want the pushed one", len(rs))
	}
}

func TestReceiveHonoursWaitAndCancel(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	start := time.Now()
	got, err := d.Receive(ctxT(t), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 100 * time.Millisecond})
	if err != nil || len(got) != 0 {
		t.Fatalf("receive on an empty queue = %v, %v", got, err)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("receive returned after %v, before its 100ms wait", time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err = d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
	if errcode.Of(err) != errcode.Canceled {
		t.Fatalf("receive with a canceled context: %v, want Canceled", err)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	// A receiver waiting for work returns when the queue closes.
	waiting := make(chan error, 1)
	go func() {
		_, err := d.Receive(ctxT(t), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
		waiting <- err
	}()
	for d.idle.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; errcode.Of(err) != errcode.FailedPrecondition {
		t.Errorf("waiting receive after close: %v, want FailedPrecondition", err)
	}
	if err := d.Close(); errcode.Of(err) != errcode.FailedPrecondition {
		t.Errorf("second close: %v, want FailedPrecondition", err)
	}
	if _, err := d.Push(ctxT(t), []*driver.Message{msg("a")}); errcode.Of(err) != errcode.FailedPrecondition {
		t.Errorf("push after close: %v, want FailedPrecondition", err)
	}
	if errs := d.Complete(ctxT(t), driver.Completions(driver.Lease{})); errcode.Of(first(errs)) != errcode.FailedPrecondition {
		t.Errorf("complete after close: %v, want FailedPrecondition", errs)
	}
}

// TestServerSettingsThroughOptions: libpq's options parameter reaches the
// server, spaces and all.
func TestServerSettingsThroughOptions(t *testing.T) {
	t.Parallel()
	d := openDriver(t, "options=-c statement_timeout=5s -c lock_timeout=1s")
	ctx := ctxT(t)
	for setting, want := range map[string]string{"statement_timeout": "5s", "lock_timeout": "1s"} {
		var got string
		if err := d.pool.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
}

// TestDuplicatesSwitchPushesToOnConflict: a push through the pool inserts
// without ON CONFLICT first; once one finds a task id taken, the queue's
// pushes go straight to ON CONFLICT for dedupWindow, so a workload of
// duplicates fails one statement per window rather than one per push.
func TestDuplicatesSwitchPushesToOnConflict(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	push := func(ids ...string) []driver.PushResult {
		t.Helper()
		msgs := make([]*driver.Message, len(ids))
		for i, id := range ids {
			msgs[i] = msg(id)
		}
		res, err := d.Push(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// A push that fell back to ON CONFLICT records when it did so.
	fellBack := func(since int64) bool { return d.conflictAt.Load() != since }
	first := push("a")
	if first[0].Duplicate || fellBack(0) {
		t.Fatalf("first push: %+v, fell back %v; want a new message stored at once", first, fellBack(0))
	}
	steps := []struct {
		name     string
		ids      []string
		dup      []bool
		fallBack bool
	}{
		{"a duplicate falls back", []string{"a"}, []bool{true}, true},
		{"the next goes to ON CONFLICT at once", []string{"a"}, []bool{true}, false},
		{"a batch in the window too", []string{"b", "a"}, []bool{false, true}, false},
		{"a new task in the window is stored", []string{"c"}, []bool{false}, false},
	}
	for _, s := range steps {
		before := d.conflictAt.Load()
		res := push(s.ids...)
		for i := range res {
			if res[i].Duplicate != s.dup[i] || res[i].MessageID == "" {
				t.Errorf("%s: result %d = %+v, want Duplicate %v with a message id", s.name, i, res[i], s.dup[i])
			}
		}
		if res[len(res)-1].Duplicate && s.ids[len(s.ids)-1] == "a" && res[len(res)-1].MessageID != first[0].MessageID {
			t.Errorf("%s: duplicate of a reported message %s, want %s", s.name, res[len(res)-1].MessageID, first[0].MessageID)
		}
		if got := fellBack(before); got != s.fallBack {
			t.Errorf("%s: a plain insert failed and fell back: %v, want %v", s.name, got, s.fallBack)
		}
	}
	// After the window, pushes try the plain insert again.
	past := time.Now().Add(-dedupWindow - time.Second).UnixNano()
	d.conflictAt.Store(past)
	if res := push("a"); !res[0].Duplicate || !fellBack(past) {
		t.Errorf("after the window: %+v, fell back %v; want a duplicate found by a failed plain insert", res, fellBack(past))
	}
	if st, err := d.Stats(ctx); err != nil || st.Ready != 3 {
		t.Errorf("stats = %+v, %v; want a, b and c ready", st, err)
	}
}

// TestWaitBesideInfiniteVisibility: a message another tool made visible at
// 'infinity' (never) must not make a waiting Receive fail: Postgres cannot
// subtract an infinite time, which the wait's look at the next visible
// message did.
func TestWaitBesideInfiniteVisibility(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	if _, err := d.pool.Exec(ctx, `INSERT INTO `+d.sql.messagesTable+` (queue, packed_body, visible_at) VALUES ($1, 'a{}', 'infinity')`, d.cfg.queue); err != nil {
		t.Fatal(err)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 50 * time.Millisecond})
	if err != nil || len(got) != 0 {
		t.Fatalf("Receive beside a message visible at infinity = %d messages, %v; want none and no error", len(got), err)
	}
}

// TestDamagedRowsUnderPolicies: the claim through claim_with_policies (a
// queue with a concurrency cap) quarantines damaged rows as the plain claim
// does, keyed or not, and returns the good messages.
func TestDamagedRowsUnderPolicies(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 10}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Push(ctx, []*driver.Message{
		{ID: "bad", Body: []byte(`{}`), ConcurrencyKey: "k"},
		{ID: "bad2", Body: []byte(`{}`)},
		{ID: "good", Body: []byte(`{}`), ConcurrencyKey: "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, set := range []string{"deliveries = 2147483647", "enqueued_at = '-infinity'"} {
		if _, err := d.pool.Exec(ctx, `UPDATE `+d.sql.messagesTable+` SET `+set+` WHERE id = $1`, res[i].MessageID); err != nil {
			t.Fatal(err)
		}
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("claim under policies = %d messages, %v; want the good one alone", len(got), err)
	}
	dead, err := d.ListDead(ctx, 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("ListDead = %d, %v; want both damaged messages", len(dead), err)
	}
	for _, m := range dead {
		if !strings.HasPrefix(m.Reason, "corrupt record: ") {
			t.Errorf("dead letter %s reason %q; want it to say corrupt record", m.ID, m.Reason)
		}
	}
}
