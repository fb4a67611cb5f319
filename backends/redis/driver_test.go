package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/spinconn"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func msg(id string, pri int) *driver.Message {
	return &driver.Message{ID: id, Body: []byte("body-" + id), Priority: pri}
}

func push(t testing.TB, d *Driver, msgs ...*driver.Message) []driver.PushResult {
	t.Helper()
	res, err := d.Push(testCtx(t), msgs)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return res
}

func receive(t testing.TB, d *Driver, n int, vis time.Duration) []*driver.Received {
	t.Helper()
	recs, err := d.Receive(testCtx(t), driver.ReceiveParams{Max: n, Visibility: vis})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return recs
}

func stats(t testing.TB, d *Driver) driver.Stats {
	t.Helper()
	s, err := d.Stats(testCtx(t))
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	return s
}

func wantCode(t testing.TB, what string, err error, code errcode.Code) {
	t.Helper()
	if got := errcode.Of(err); got != code {
		t.Fatalf("%s: got error %v (code %v), want code %v", what, err, got, code)
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url       string
		queue     string
		prefix    string
		addr      string
		db        int
		network   string
		maxMsg    int
		spin      time.Duration
		wantError bool
	}{
		{url: "redis://127.0.0.1:6379/0", queue: "default", prefix: "jobq", addr: "127.0.0.1:6379", network: "tcp", spin: spinconn.DefaultBudget},
		{url: "redis://h:7000/3?queue=etl&prefix=app", queue: "etl", prefix: "app", addr: "h:7000", db: 3, network: "tcp", spin: spinconn.DefaultBudget},
		{url: "rediss://h:6380/0?queue=q&dial_timeout=2s", queue: "q", prefix: "jobq", addr: "h:6380", network: "tcp", spin: spinconn.DefaultBudget},
		{url: "redis+unix:///run/redis.sock?db=2&queue=q", queue: "q", prefix: "jobq", addr: "/run/redis.sock", db: 2, network: "unix", spin: spinconn.DefaultBudget},
		{url: "redis://h:1/0?spin=0", queue: "default", prefix: "jobq", addr: "h:1", network: "tcp"},
		{url: "redis://h:1/0?spin=250us", queue: "default", prefix: "jobq", addr: "h:1", network: "tcp", spin: 250 * time.Microsecond},
		{url: "redis://h:1/0?spin=-1ms", wantError: true},
		{url: "redis://h:1/0?spin=fast", wantError: true},
		{url: "redis://127.0.0.1:6379/0?queue=q&bogus=1", wantError: true},
		{url: "redis://127.0.0.1:6379/0?queue=a{b}", wantError: true},
		{url: "redis://127.0.0.1:6379/0?queue=", wantError: true},
		{url: "redis://127.0.0.1:6379/0?prefix=", wantError: true},
		{url: "redis://127.0.0.1:6379/0?pool_size=many", wantError: true},
		{url: "redis://127.0.0.1:6379/0?max_message_bytes=-1", wantError: true},
		{url: "redis://127.0.0.1:6379/0?max_message_bytes=big", wantError: true},
		// go-redis took a negative database number and used database 0.
		{url: "redis://127.0.0.1:6379/-1", wantError: true},
		{url: "redis://127.0.0.1:6379/0?db=-1", wantError: true},
		{url: "redis://127.0.0.1:6379/2147483648", wantError: true},
		{url: "redis://127.0.0.1:6379/NaN", wantError: true},
		// go-redis panicked creating its pool.
		{url: "redis://127.0.0.1:6379/0?pool_size=99999999999999", wantError: true},
		// go-redis multiplied seconds by 1e9 without an overflow check.
		{url: "redis://127.0.0.1:6379/0?dial_timeout=9999999999999", wantError: true},
		{url: "redis://127.0.0.1:6379/0?read_timeout=NaN", wantError: true},
		{url: "redis://h:1/0?max_message_bytes=1000", queue: "default", prefix: "jobq", addr: "h:1", network: "tcp", maxMsg: 1000, spin: spinconn.DefaultBudget},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := parseURL(u)
			if tt.wantError {
				wantCode(t, "parse "+tt.url, err, errcode.InvalidArgument)
				return
			}
			if err != nil {
				t.Fatalf("parse %s: %v", tt.url, err)
			}
			if cfg.queue != tt.queue || cfg.prefix != tt.prefix || cfg.options.Addr != tt.addr ||
				cfg.options.DB != tt.db || cfg.options.Network != tt.network || cfg.maxMessageBytes != tt.maxMsg || cfg.spin != tt.spin {
				t.Errorf("parse %s: got queue %q prefix %q addr %q db %d network %q max_message_bytes %d spin %s", tt.url,
					cfg.queue, cfg.prefix, cfg.options.Addr, cfg.options.DB, cfg.options.Network, cfg.maxMessageBytes, cfg.spin)
			}
		})
	}
}

func TestUnknownParameterNamesIt(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("redis://127.0.0.1:6379/0?queue=q&bogus=1")
	_, err := parseURL(u)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("bogus")) {
		t.Fatalf("error %v does not name the unknown parameter", err)
	}
}

func TestPasswordNotInErrors(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("redis://user:s3cret@127.0.0.1:1/0?queue=q&dial_timeout=200ms")
	_, err := (&Opener{}).Open(testCtx(t), u, driver.OpenOptions{})
	if err == nil {
		t.Fatal("open on a closed port succeeded")
	}
	wantCode(t, "open on a closed port", err, errcode.Unavailable)
	if bytes.Contains([]byte(err.Error()), []byte("s3cret")) {
		t.Fatalf("error prints the password: %v", err)
	}
}

func TestPushReceiveComplete(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	before := time.Now().Add(-time.Second)
	res := push(t, d, msg("a", 0))
	if len(res) != 1 || res[0].MessageID == "" || res[0].Duplicate {
		t.Fatalf("push result %+v", res)
	}
	recs := receive(t, d, 10, time.Minute)
	if len(recs) != 1 {
		t.Fatalf("received %d messages, want 1", len(recs))
	}
	r := recs[0]
	if r.ID != "a" || string(r.Body) != "body-a" || r.DeliveryCount != 1 || r.Lease.MessageID != res[0].MessageID ||
		r.EnqueuedAt.Before(before) || r.Lease.Token == "" || !r.Lease.Expiry.After(time.Now()) {
		t.Fatalf("received %+v", r)
	}
	if s := stats(t, d); s.InFlight != 1 || s.Ready != 0 {
		t.Fatalf("stats while leased: %+v", s)
	}
	if errs := d.Complete(ctx, driver.Completions(r.Lease)); errs != nil {
		t.Fatalf("complete: %v", errs)
	}
	if errs := d.Complete(ctx, driver.Completions(r.Lease)); errs == nil {
		t.Fatal("second complete succeeded")
	} else {
		wantCode(t, "second complete", errs[0], errcode.LockLost)
	}
	if s := stats(t, d); s != (driver.Stats{Known: s.Known}) {
		t.Fatalf("stats after complete: %+v", s)
	}
}

func TestBinaryBodyKeptExactly(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	body := []byte{0, 1, 2, 0xff, '\n', 0, 'x'}
	push(t, d, &driver.Message{ID: "bin", Body: body})
	recs := receive(t, d, 1, time.Minute)
	if len(recs) != 1 || !bytes.Equal(recs[0].Body, body) {
		t.Fatalf("got %v, want body %v", recs, body)
	}
}

func TestPriorityThenArrival(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	push(t, d, msg("low1", -5), msg("hi1", 7), msg("mid1", 0), msg("hi2", 7), msg("max", 1000), msg("min", -1000), msg("mid2", 0))
	var got []string
	for _, r := range receive(t, d, 100, time.Minute) {
		got = append(got, r.ID)
	}
	want := []string{"max", "hi1", "hi2", "mid1", "mid2", "low1", "min"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("claim order %v, want %v", got, want)
	}
}

func TestDedupOfQueuedID(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	first := push(t, d, msg("same", 0))
	again := push(t, d, msg("same", 0), msg("other", 0), msg("other", 0))
	if !again[0].Duplicate || again[0].MessageID != first[0].MessageID || again[1].Duplicate || !again[2].Duplicate {
		t.Fatalf("push results %+v after %+v", again, first)
	}
	if s := stats(t, d); s.Ready != 2 {
		t.Fatalf("ready %d, want 2", s.Ready)
	}
	// A leased task is still queued; once completed, its ID is free again.
	recs := receive(t, d, 10, time.Minute)
	if res := push(t, d, msg("same", 0)); !res[0].Duplicate {
		t.Fatal("push of a leased task's ID was not a duplicate")
	}
	for _, r := range recs {
		if errs := d.Complete(ctx, driver.Completions(r.Lease)); errs != nil {
			t.Fatal(errs)
		}
	}
	if res := push(t, d, msg("same", 0)); res[0].Duplicate {
		t.Fatal("push after completion was a duplicate")
	}
	// Messages without an ID are never duplicates.
	if res := push(t, d, &driver.Message{Body: []byte("x")}, &driver.Message{Body: []byte("x")}); res[0].Duplicate || res[1].Duplicate {
		t.Fatalf("ID-less pushes: %+v", res)
	}
}

func TestFencedLeases(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	push(t, d, msg("f", 0))
	old := receive(t, d, 1, 100*time.Millisecond)[0]
	time.Sleep(150 * time.Millisecond)

	// Expired but not yet claimed again: no longer held.
	_, err := d.Renew(ctx, old.Lease, time.Minute)
	wantCode(t, "renew of an expired lease", err, errcode.LockLost)

	again := receive(t, d, 1, time.Minute)
	if len(again) != 1 || again[0].DeliveryCount != 2 || again[0].Lease.Token == old.Lease.Token {
		t.Fatalf("reclaim: %+v", again)
	}
	cur := again[0]
	stale := []struct {
		name string
		err  error
	}{
		{"complete", d.Complete(ctx, driver.Completions(old.Lease))[0]},
		{"requeue", d.Requeue(ctx, []driver.RequeueParams{{Lease: old.Lease}})[0]},
		{"dead-letter", d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: old.Lease, Reason: "x"}})[0]},
	}
	for _, s := range stale {
		wantCode(t, s.name+" with a stale token", s.err, errcode.LockLost)
	}
	if _, err := d.Renew(ctx, old.Lease, time.Minute); errcode.Of(err) != errcode.LockLost {
		t.Fatalf("renew with a stale token: %v", err)
	}
	// The stale calls changed nothing: the current holder still holds it.
	renewed, err := d.Renew(ctx, cur.Lease, time.Minute)
	if err != nil || renewed.Token != cur.Lease.Token || !renewed.Expiry.After(cur.Lease.Expiry.Add(-time.Second)) {
		t.Fatalf("renew by the holder: %+v, %v", renewed, err)
	}
	if s := stats(t, d); s.InFlight != 1 {
		t.Fatalf("stats %+v", s)
	}
	if errs := d.Complete(ctx, driver.Completions(renewed)); errs != nil {
		t.Fatal(errs)
	}
}

func TestRenewKeepsLeaseAlive(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	push(t, d, msg("r", 0))
	r := receive(t, d, 1, 300*time.Millisecond)[0]
	lease := r.Lease
	for range 4 {
		time.Sleep(150 * time.Millisecond)
		var err error
		if lease, err = d.Renew(ctx, lease, 300*time.Millisecond); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
	if recs := receive(t, d, 1, time.Minute); len(recs) != 0 {
		t.Fatalf("renewed message was claimed again: %+v", recs[0])
	}
	if errs := d.Complete(ctx, driver.Completions(lease)); errs != nil {
		t.Fatal(errs)
	}
}

func TestBatchSettlementReportsPerItem(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	var msgs []*driver.Message
	for i := range 600 { // more than one chunk
		msgs = append(msgs, msg(fmt.Sprint(i), 0))
	}
	push(t, d, msgs...)
	recs := receive(t, d, 1000, time.Minute)
	if len(recs) != 600 {
		t.Fatalf("received %d, want 600", len(recs))
	}
	leases := make([]driver.Lease, len(recs))
	for i, r := range recs {
		leases[i] = r.Lease
	}
	leases[300].Token = "stale"
	errs := d.Complete(ctx, driver.Completions(leases...))
	if len(errs) != len(leases) {
		t.Fatalf("got %d errors for %d leases", len(errs), len(leases))
	}
	for i, err := range errs {
		if (i == 300) != (err != nil) {
			t.Fatalf("lease %d: error %v", i, err)
		}
	}
	wantCode(t, "stale lease in a batch", errs[300], errcode.LockLost)
	if s := stats(t, d); s.InFlight != 1 || s.Ready != 0 {
		t.Fatalf("stats after batch complete: %+v", s)
	}
}

func TestRequeueDelayAndBody(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	push(t, d, msg("a", 0), msg("b", 0))
	recs := receive(t, d, 2, time.Minute)
	errs := d.Requeue(ctx, []driver.RequeueParams{
		{Lease: recs[0].Lease, Body: []byte("new body")},
		{Lease: recs[1].Lease, Delay: time.Hour},
	})
	if errs != nil {
		t.Fatal(errs)
	}
	if s := stats(t, d); s.Ready != 1 || s.Delayed != 1 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}
	got := receive(t, d, 10, time.Minute)
	if len(got) != 1 || got[0].ID != "a" || string(got[0].Body) != "new body" || got[0].DeliveryCount != 2 {
		t.Fatalf("after requeue: %+v", got)
	}
	peek, err := d.Peek(ctx, 10)
	if err != nil || len(peek) != 2 {
		t.Fatalf("peek: %v, %v", peek, err)
	}
	if peek[0].ID != "b" || peek[0].InFlight || time.Until(peek[0].VisibleAt) < 50*time.Minute {
		t.Fatalf("delayed message peeked as %+v", peek[0])
	}
	if peek[1].ID != "a" || !peek[1].InFlight {
		t.Fatalf("leased message peeked as %+v", peek[1])
	}
}

func TestDelayedPushBecomesVisible(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	m := msg("later", 0)
	m.NotBefore = time.Now().Add(300 * time.Millisecond)
	push(t, d, m)
	if recs := receive(t, d, 1, time.Minute); len(recs) != 0 {
		t.Fatal("delayed message received before its time")
	}
	if s := stats(t, d); s.Delayed != 1 || s.Ready != 0 {
		t.Fatalf("stats %+v", s)
	}
	// A waiting receiver wakes when the message comes due, without a push.
	recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 10 * time.Second})
	if err != nil || len(recs) != 1 || recs[0].ID != "later" {
		t.Fatalf("receive with wait: %v, %v", recs, err)
	}
	if time.Now().Before(m.NotBefore) {
		t.Fatal("delayed message received before its NotBefore")
	}
}

func TestWaitingReceiverWakesOnPush(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	type result struct {
		recs []*driver.Received
		err  error
	}
	const receivers = 3
	done := make(chan result, receivers)
	for range receivers {
		go func() {
			recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 20 * time.Second})
			done <- result{recs, err}
		}()
	}
	// Let the receivers go idle, then push one message per receiver, one
	// at a time: each announcement wakes one waiter.
	for d.wake.Waiters() < receivers {
		time.Sleep(5 * time.Millisecond)
	}
	for i := range receivers {
		push(t, d, msg(fmt.Sprint(i), 0))
	}
	seen := map[string]bool{}
	for range receivers {
		r := <-done
		if r.err != nil || len(r.recs) != 1 {
			t.Fatalf("receive: %v, %v", r.recs, r.err)
		}
		seen[r.recs[0].ID] = true
	}
	if len(seen) != receivers {
		t.Fatalf("receivers got %v", seen)
	}
}

func TestWaitReturnsEmptyAfterWait(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	start := time.Now()
	recs, err := d.Receive(testCtx(t), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 200 * time.Millisecond})
	if err != nil || len(recs) != 0 {
		t.Fatalf("receive on an empty queue: %v, %v", recs, err)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Fatal("receive returned before its wait was over")
	}
}

func TestReceiveCanceled(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Minute})
	wantCode(t, "canceled receive", err, errcode.Canceled)
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	push(t, d, msg("d1", 3), msg("d2", 0), msg("d3", 0))
	recs := receive(t, d, 3, time.Minute)
	var reqs []driver.DeadLetterParams
	for _, r := range recs {
		reqs = append(reqs, driver.DeadLetterParams{Lease: r.Lease, Reason: "failed " + r.ID, Detail: "tail of output"})
	}
	if errs := d.DeadLetter(ctx, reqs); errs != nil {
		t.Fatal(errs)
	}
	if s := stats(t, d); s.Dead != 3 || s.Ready+s.InFlight+s.Delayed != 0 {
		t.Fatalf("stats %+v", s)
	}
	// A dead task's ID is no longer queued.
	if res := push(t, d, msg("d1", 0)); res[0].Duplicate {
		t.Fatal("push of a dead task's ID was a duplicate")
	}
	dead, err := d.ListDead(ctx, 10)
	if err != nil || len(dead) != 3 {
		t.Fatalf("list dead: %v, %v", dead, err)
	}
	for _, m := range dead {
		if m.Reason != "failed "+m.ID || m.Detail != "tail of output" || m.DeliveryCount != 1 ||
			string(m.Body) != "body-"+m.ID || time.Since(m.DeadAt) > time.Minute {
			t.Fatalf("dead letter %+v", m)
		}
	}
	n, err := d.RequeueDead(ctx, []string{dead[1].MessageID, "no-such-id"})
	if err != nil || n != 1 {
		t.Fatalf("requeue dead: %d, %v", n, err)
	}
	n, err = d.PurgeDead(ctx, []string{dead[0].MessageID})
	if err != nil || n != 1 {
		t.Fatalf("purge dead: %d, %v", n, err)
	}
	if s := stats(t, d); s.Dead != 1 || s.Ready != 2 {
		t.Fatalf("stats %+v", s)
	}
	got := receive(t, d, 10, time.Minute)
	if len(got) != 2 || got[0].ID != "d1" || got[1].ID != dead[1].ID || got[1].DeliveryCount != dead[1].DeliveryCount+1 {
		t.Fatalf("after requeue dead: %+v %+v", got[0], got[1])
	}
	if n, err := d.PurgeDead(ctx, nil); err != nil || n != 1 {
		t.Fatalf("purge all: %d, %v", n, err)
	}
}

func TestRequeueAllDeadInManyScripts(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	const n = clearBatch + 10
	var msgs []*driver.Message
	for i := range n {
		msgs = append(msgs, msg(fmt.Sprint(i), 0))
	}
	push(t, d, msgs...)
	var reqs []driver.DeadLetterParams
	for len(reqs) < n {
		for _, r := range receive(t, d, maxReceiveBatch, time.Minute) {
			reqs = append(reqs, driver.DeadLetterParams{Lease: r.Lease, Reason: "r"})
		}
	}
	if errs := d.DeadLetter(ctx, reqs); errs != nil {
		t.Fatal(errs[0])
	}
	moved, err := d.RequeueDead(ctx, nil)
	if err != nil || moved != n {
		t.Fatalf("requeue all dead: %d, %v", moved, err)
	}
	if s := stats(t, d); s.Ready != n || s.Dead != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestClearAndPeek(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	later := msg("later", 0)
	later.NotBefore = time.Now().Add(time.Hour)
	push(t, d, msg("a", 0), msg("b", 5), later, msg("c", 0))
	leased := receive(t, d, 1, time.Minute)[0] // b
	peek, err := d.Peek(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, p := range peek {
		order = append(order, p.ID)
	}
	if fmt.Sprint(order) != "[a c later b]" {
		t.Fatalf("peek order %v", order)
	}
	if small, _ := d.Peek(ctx, 1); len(small) != 1 || small[0].ID != "a" {
		t.Fatalf("peek 1: %v", small)
	}
	// Peek shows a leased message in flight with its delivery count.
	if b := peek[3]; !b.InFlight || b.DeliveryCount != 1 || peek[0].InFlight || peek[0].DeliveryCount != 0 {
		t.Fatalf("peek: leased b is %+v, ready a is %+v; want b in flight with 1 delivery, a with none", b, peek[0])
	}
	n, err := d.Clear(ctx)
	if err != nil || n != 4 {
		t.Fatalf("clear: %d, %v", n, err)
	}
	if s := stats(t, d); s.Ready+s.Delayed+s.InFlight != 0 {
		t.Fatalf("stats after clear %+v", s)
	}
	wantCode(t, "complete after clear", d.Complete(ctx, driver.Completions(leased.Lease))[0], errcode.LockLost)
	if res := push(t, d, msg("a", 0)); res[0].Duplicate {
		t.Fatal("ID still taken after clear")
	}
}

func TestStatsCountExpiredLeasesAsReady(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	push(t, d, msg("e", 0))
	receive(t, d, 1, 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if s := stats(t, d); s.Ready != 1 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestClosedDriver(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	_, err := d.Push(ctx, []*driver.Message{msg("x", 0)})
	wantCode(t, "push after close", err, errcode.FailedPrecondition)
	_, err = d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Second})
	wantCode(t, "receive after close", err, errcode.FailedPrecondition)
	wantCode(t, "complete after close", d.Complete(ctx, driver.Completions(driver.Lease{MessageID: "1"}))[0], errcode.FailedPrecondition)
	wantCode(t, "second close", d.Close(), errcode.FailedPrecondition)
}

func TestAsGivesClient(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	var c *goredis.Client
	if !d.As(&c) || c == nil {
		t.Fatal("As(**redis.Client) failed")
	}
	if err := c.Ping(testCtx(t)).Err(); err != nil {
		t.Fatalf("ping through the escape hatch: %v", err)
	}
	var uc goredis.UniversalClient
	if !d.As(&uc) || uc.Ping(testCtx(t)).Err() != nil {
		t.Fatal("As(*redis.UniversalClient) failed")
	}
	var cc *goredis.ClusterClient
	if d.As(&cc) {
		t.Fatal("As(**redis.ClusterClient) succeeded on a single-server queue")
	}
	var self *Driver
	if !d.As(&self) || self != d || len(self.Keys()) != 8 {
		t.Fatal("As(**Driver) failed")
	}
	for _, k := range self.Keys() {
		if !strings.Contains(k, "{"+d.queue+"}") {
			t.Fatalf("key %q lacks the hash tag {%s}", k, d.queue)
		}
	}
	var wrong *int
	if d.As(&wrong) {
		t.Fatal("As accepted an unsupported type")
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want errcode.Code
	}{
		{context.Canceled, errcode.Canceled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), errcode.DeadlineExceeded},
		{goredis.Nil, errcode.NotFound},
		{goredis.ErrClosed, errcode.FailedPrecondition},
		{goredis.ErrPoolTimeout, errcode.Unavailable},
		{driver.Errorf(errcode.LockLost, "lost"), errcode.LockLost},
		{errors.New("plain"), errcode.Unknown},
	}
	d := &Driver{}
	for _, tt := range tests {
		if got := d.ErrorCode(tt.err); got != tt.want {
			t.Errorf("ErrorCode(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestServerErrorCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		msg  string
		want errcode.Code
	}{
		{"LOADING Redis is loading the dataset in memory", errcode.Unavailable},
		{"READONLY You can't write against a read only replica.", errcode.Unavailable},
		{"OOM command not allowed when used memory > 'maxmemory'.", errcode.ResourceExhausted},
		{"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.", errcode.ResourceExhausted},
		{"NOAUTH Authentication required.", errcode.PermissionDenied},
		{"WRONGPASS invalid username-password pair", errcode.PermissionDenied},
		{"ERR Script attempted to access a non local key in a cluster node script: 3adf9e, on @user_script:62.", errcode.Unavailable},
		{"ERR Script attempted to execute a command while the cluster is down", errcode.Unavailable},
		{"ERR something odd", errcode.Internal},
	}
	for _, tt := range tests {
		if got := serverCode(tt.msg); got != tt.want {
			t.Errorf("serverCode(%q) = %v, want %v", tt.msg, got, tt.want)
		}
	}
	// A real error reply goes through classify.
	d := openDriver(t)
	err := d.client.Do(testCtx(t), "NO-SUCH-COMMAND").Err()
	if got := d.ErrorCode(err); got != errcode.Internal {
		t.Fatalf("ErrorCode(%v) = %v, want Internal", err, got)
	}
}

// A dead letter requeued while another message holds its task ID merges
// into that message: the holder keeps the ID, and no second copy runs.
func TestRequeuedDeadLetterKeepsOthersID(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	push(t, d, msg("x", 0))
	r := receive(t, d, 1, time.Minute)[0]
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: r.Lease, Reason: "r"}}); errs != nil {
		t.Fatal(errs)
	}
	holder := push(t, d, msg("x", 5))[0] // now queued under the same ID
	if n, err := d.RequeueDead(ctx, nil); err != nil || n != 1 {
		t.Fatalf("requeue dead: %d, %v", n, err)
	}
	recs := receive(t, d, 2, time.Minute)
	if len(recs) != 1 || recs[0].Lease.MessageID != holder.MessageID {
		t.Fatalf("received %+v; want the holder alone", recs)
	}
	if res := push(t, d, msg("x", 0)); !res[0].Duplicate || res[0].MessageID != holder.MessageID {
		t.Fatalf("push while the holder is running: %+v", res[0])
	}
}

func TestParseClusterURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url       string
		addrs     []string
		wantError bool
	}{
		{url: "redis://a:7000?cluster=true&addr=b:7001&addr=c:7002&queue=q", addrs: []string{"a:7000", "b:7001", "c:7002"}},
		{url: "rediss://a:7000?cluster=1", addrs: []string{"a:7000"}},
		{url: "redis+unix:///run/redis.sock?cluster=true", wantError: true},
		{url: "redis://a:7000?cluster=maybe", wantError: true},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.url)
		cfg, err := parseURL(u)
		if tt.wantError {
			wantCode(t, "parse "+tt.url, err, errcode.InvalidArgument)
			continue
		}
		if err != nil {
			t.Fatalf("parse %s: %v", tt.url, err)
		}
		if cfg.cluster == nil || cfg.options != nil || fmt.Sprint(cfg.cluster.Addrs) != fmt.Sprint(tt.addrs) ||
			cfg.cluster.MaxRetries != -1 || !cfg.cluster.ContextTimeoutEnabled {
			t.Errorf("parse %s: got %+v", tt.url, cfg.cluster)
		}
	}
}

// testLeases holds a lease per driver for table-driven tests.
var testLeases sync.Map

func leaseOf(d *Driver) driver.Lease {
	l, _ := testLeases.Load(d)
	return l.(driver.Lease)
}

// A receiver that went idle before a delayed message was pushed (or a
// message was requeued with a delay) still wakes when it comes due, long
// before its own wait ends.
func TestIdleReceiverWakesForLaterDelayedMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		add  func(t *testing.T, d *Driver)
	}{
		{"delayed push", func(t *testing.T, d *Driver) {
			m := msg("later", 0)
			m.NotBefore = time.Now().Add(300 * time.Millisecond)
			push(t, d, m)
		}},
		{"delayed requeue", func(t *testing.T, d *Driver) {
			// Claimed by another receiver before this one went idle.
			if errs := d.Requeue(testCtx(t), []driver.RequeueParams{{Lease: leaseOf(d), Delay: 300 * time.Millisecond}}); errs != nil {
				t.Fatal(errs)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openDriver(t)
			if tt.name == "delayed requeue" {
				push(t, d, msg("later", 0))
				testLeases.Store(d, receive(t, d, 1, time.Hour)[0].Lease)
			}
			ctx := testCtx(t)
			got := make(chan []*driver.Received, 1)
			go func() {
				recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 25 * time.Second})
				if err != nil {
					t.Error(err)
				}
				got <- recs
			}()
			for d.wake.Waiters() == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			tt.add(t, d)
			select {
			case recs := <-got:
				if len(recs) != 1 || recs[0].ID != "later" {
					t.Fatalf("received %v", recs)
				}
			case <-time.After(15 * time.Second): // far below the 25 s wait
				t.Fatal("the idle receiver did not wake when the delayed message came due")
			}
		})
	}
}

// Many receivers with leases shorter than their work race for the same
// messages. Fencing must let exactly one Complete per message succeed, and
// every message must be completed in the end.
func TestRacingLeasesCompleteEachMessageOnce(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	const n = 300
	var msgs []*driver.Message
	for i := range n {
		msgs = append(msgs, msg(fmt.Sprint(i), 0))
	}
	push(t, d, msgs...)
	var (
		mu       sync.Mutex
		done     = map[string]int{}
		lost     int
		finished = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-finished:
					return
				default:
				}
				recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 4, Visibility: 30 * time.Millisecond, Wait: 50 * time.Millisecond})
				if err != nil {
					t.Error(err)
					return
				}
				// Every third batch works past its lease.
				if (w+i)%3 == 0 {
					time.Sleep(40 * time.Millisecond)
				}
				leases := make([]driver.Lease, len(recs))
				for j, r := range recs {
					leases[j] = r.Lease
				}
				errs := d.Complete(ctx, driver.Completions(leases...))
				mu.Lock()
				for j, r := range recs {
					if errs == nil || errs[j] == nil {
						done[r.ID]++
					} else if errcode.Of(errs[j]) == errcode.LockLost {
						lost++
					} else {
						t.Errorf("complete: %v", errs[j])
					}
				}
				if len(done) == n {
					select {
					case <-finished:
					default:
						close(finished)
					}
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-finished:
	case <-ctx.Done():
	}
	wg.Wait()
	for id, k := range done {
		if k != 1 {
			t.Errorf("message %s was completed %d times", id, k)
		}
	}
	if len(done) != n {
		t.Fatalf("%d of %d messages completed", len(done), n)
	}
	if s := stats(t, d); s.Ready+s.InFlight+s.Delayed != 0 {
		t.Fatalf("stats after the race: %+v", s)
	}
	t.Logf("%d completions refused with LockLost", lost)
}

// TestSetsStayHashTablesAndSkiplists: the ready and in-flight sets and the
// task-id hash never take Redis's listpack encoding, which every write
// would scan (scripts.go, mark and ids_mark), from the queue's first push
// on and after a Clear, and the member that keeps the sets skiplists is
// never claimed, counted or shown.
func TestSetsStayHashTablesAndSkiplists(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	encoding := func(key string) string {
		t.Helper()
		enc, err := d.client.ObjectEncoding(ctx, key).Result()
		if err != nil {
			t.Fatalf("OBJECT ENCODING %s: %v", key, err)
		}
		return enc
	}
	ready, inflight, ids := d.keys[1], d.keys[3], d.keys[4]
	checkEncodings := func(when string) {
		t.Helper()
		for key, want := range map[string]string{ready: "skiplist", inflight: "skiplist", ids: "hashtable"} {
			if got := encoding(key); got != want {
				t.Fatalf("%s: %s is a %s, want a %s", when, key, got, want)
			}
		}
	}
	push(t, d, msg("a", 0), msg("b", 0), msg("c", 0))
	checkEncodings("after the first push")
	// Claiming more than is ready pops the mark too; it must go back.
	for round := range 2 {
		recs := receive(t, d, 10, time.Minute)
		if len(recs) != 3 {
			t.Fatalf("round %d: claimed %d messages, want 3", round, len(recs))
		}
		checkEncodings(fmt.Sprintf("round %d", round))
		if s := stats(t, d); s.Ready != 0 || s.InFlight != 3 {
			t.Fatalf("round %d: stats %+v, want 0 ready and 3 in flight", round, s)
		}
		if peeked, err := d.Peek(ctx, 10); err != nil || len(peeked) != 3 {
			t.Fatalf("round %d: peek gave %d messages (%v), want 3", round, len(peeked), err)
		}
		leases := make([]driver.Lease, len(recs))
		for i, r := range recs {
			leases[i] = r.Lease
		}
		if errs := d.Complete(ctx, driver.Completions(leases...)); errs != nil {
			t.Fatal(errs)
		}
		if got := receive(t, d, 10, time.Minute); len(got) != 0 {
			t.Fatalf("round %d: an empty queue gave %d messages", round, len(got))
		}
		push(t, d, msg("a", 0), msg("b", 0), msg("c", 0))
	}
	if n, err := d.Clear(ctx); err != nil || n != 3 {
		t.Fatalf("Clear = %d, %v; want 3", n, err)
	}
	if s := stats(t, d); s.Ready != 0 || s.InFlight != 0 || s.Delayed != 0 {
		t.Fatalf("stats after Clear %+v, want nothing queued", s)
	}
	push(t, d, msg("d", 0))
	checkEncodings("after Clear and a push")
	if recs := receive(t, d, 10, time.Minute); len(recs) != 1 {
		t.Fatalf("after Clear: claimed %d messages, want 1", len(recs))
	}
	checkEncodings("after Clear and a claim")
}

// TestPushFieldsLeftOutTakeDefaults pushes messages whose trailing fields
// hold their defaults, which the push call leaves out for its last
// message, alone and after a message with every field set, and reads back
// what the script stored. The one alone with every default takes the push
// script's lone path, the others its loop.
func TestPushFieldsLeftOutTakeDefaults(t *testing.T) {
	t.Parallel()
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	full := &driver.Message{ID: "full", Body: []byte("f"), Priority: 9, NotBefore: later, ConcurrencyKey: "ck", RateLimitKey: "rk"}
	cases := []struct {
		name string
		m    driver.Message
		want string // the stored fields besides b, e and i, sorted
	}{
		{"defaults", driver.Message{}, ""},
		{"priority", driver.Message{Priority: -3}, "p=-3"},
		{"not before", driver.Message{NotBefore: later}, ""},
		{"concurrency key", driver.Message{ConcurrencyKey: "c1"}, "c=c1"},
		{"rate-limit key", driver.Message{RateLimitKey: "r1"}, "k=r1"},
		{"priority and rate-limit key", driver.Message{Priority: 2, RateLimitKey: "r2"}, "k=r2 p=2"},
	}
	for _, tc := range cases {
		for _, after := range []*driver.Message{nil, full} {
			name := tc.name
			if after != nil {
				name += " after a full message"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				d := openDriver(t)
				ctx := testCtx(t)
				m := tc.m
				m.ID, m.Body = "last", []byte("body")
				msgs := []*driver.Message{&m}
				if after != nil {
					msgs = []*driver.Message{after, &m}
				}
				res := push(t, d, msgs...)
				h, err := d.client.HGetAll(ctx, d.prefix+"m:"+res[len(res)-1].MessageID).Result()
				if err != nil {
					t.Fatal(err)
				}
				if h["b"] != "body" || h["i"] != "last" || h["e"] == "" {
					t.Fatalf("stored %v", h)
				}
				var extra []string
				for k, v := range h {
					if k != "b" && k != "e" && k != "i" {
						extra = append(extra, k+"="+v)
					}
				}
				slices.Sort(extra)
				if got := strings.Join(extra, " "); got != tc.want {
					t.Errorf("stored fields %q, want %q", got, tc.want)
				}
				if after != nil {
					f, err := d.client.HGetAll(ctx, d.prefix+"m:"+res[0].MessageID).Result()
					if err != nil {
						t.Fatal(err)
					}
					if f["p"] != "9" || f["c"] != "ck" || f["k"] != "rk" {
						t.Errorf("full message stored %v", f)
					}
				}
				var wantDelayed int64
				if !m.NotBefore.IsZero() {
					wantDelayed++
				}
				if after != nil {
					wantDelayed++
				}
				if s := stats(t, d); s.Delayed != wantDelayed || s.Ready != int64(len(msgs))-wantDelayed {
					t.Errorf("stats %+v, want %d delayed of %d", s, wantDelayed, len(msgs))
				}
			})
		}
	}
}

// TestKeyReplacedByAnotherTool: a message key another tool replaced with a
// list must not fail Peek, Clear, a claim or the dead-letter listing; the
// claim quarantines it and returns the good message.
func TestKeyReplacedByAnotherTool(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	res := push(t, d, msg("bad", 0), msg("good", 0))
	k := d.prefix + "m:" + res[0].MessageID
	if err := d.client.Del(ctx, k).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.client.RPush(ctx, k, "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	peek, err := d.Peek(ctx, 10)
	if err != nil || len(peek) != 1 || peek[0].ID != "good" {
		t.Fatalf("Peek = %d messages, %v; want the good one alone", len(peek), err)
	}
	got := receive(t, d, 10, time.Minute)
	if len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("claim returned %d messages; want the good one", len(got))
	}
	dead, err := d.ListDead(ctx, 10)
	if err != nil || len(dead) != 1 || !strings.Contains(dead[0].Reason, "not a hash") {
		t.Fatalf("ListDead = %v, %v; want the replaced key quarantined, saying it is not a hash", dead, err)
	}
	if n, err := d.PurgeDead(ctx, nil); err != nil || n != 1 {
		t.Fatalf("PurgeDead = %d, %v", n, err)
	}
	if n, err := d.client.Exists(ctx, k, d.prefix+"corrupt:"+res[0].MessageID).Result(); err != nil || n != 0 {
		t.Errorf("after the purge %d of the damaged keys remain (%v)", n, err)
	}
	// Clear meets a replaced key too.
	res = push(t, d, msg("bad2", 0))
	k = d.prefix + "m:" + res[0].MessageID
	d.client.Del(ctx, k)
	d.client.RPush(ctx, k, "garbage")
	if _, err := d.Clear(ctx); err != nil {
		t.Fatalf("Clear beside a replaced key: %v", err)
	}
}

// TestDamagedMessageUnderPolicies: the claim of a queue with a concurrency
// cap walks the ready set itself; a damaged message there is quarantined
// as by the plain claim, and the good one beside it returned.
func TestDamagedMessageUnderPolicies(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 10}); err != nil {
		t.Fatal(err)
	}
	bad, good := msg("bad", 0), msg("good", 0)
	bad.ConcurrencyKey, good.ConcurrencyKey = "k", "k"
	res := push(t, d, bad, msg("list", 0), good)
	if err := d.client.HSet(ctx, d.prefix+"m:"+res[0].MessageID, "d", "x").Err(); err != nil {
		t.Fatal(err)
	}
	k := d.prefix + "m:" + res[1].MessageID
	d.client.Del(ctx, k)
	d.client.RPush(ctx, k, "garbage")
	got := receive(t, d, 10, time.Minute)
	if len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("claim under policies returned %d messages; want the good one", len(got))
	}
	dead, err := d.ListDead(ctx, 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("ListDead = %d, %v; want both damaged messages", len(dead), err)
	}
}

// TestDamagedMessageExpiresAndDelays: a message key replaced while the
// message was leased, or while it waited delayed, must not abort the
// promotion that makes due messages ready (which would lose the others it
// had taken); the claim then quarantines it.
func TestDamagedMessageExpiresAndDelays(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	soon := msg("delayed", 0)
	soon.NotBefore = time.Now().Add(200 * time.Millisecond)
	res := push(t, d, msg("leased", 0), soon)
	leased := receive(t, d, 1, 100*time.Millisecond)
	if len(leased) != 1 {
		t.Fatalf("claimed %d", len(leased))
	}
	for _, r := range res {
		k := d.prefix + "m:" + r.MessageID
		d.client.Del(ctx, k)
		d.client.RPush(ctx, k, "garbage")
	}
	goodSoon := msg("good", 0)
	goodSoon.NotBefore = time.Now().Add(200 * time.Millisecond)
	push(t, d, goodSoon)
	time.Sleep(300 * time.Millisecond)
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute, Wait: time.Second})
	if err != nil || len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("claim after the damaged messages came due = %d messages, %v; want the good one", len(got), err)
	}
	if dead, err := d.ListDead(ctx, 10); err != nil || len(dead) != 2 {
		t.Fatalf("ListDead = %d, %v; want both damaged messages", len(dead), err)
	}
}

// TestDamagedRatePolicyValue: a rate policy whose stored value cannot be
// read limits nothing, rather than failing every claim of the queue.
func TestDamagedRatePolicyValue(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.RatePolicy, Key: "r", Limit: 5, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := d.client.HSet(ctx, d.prefix+"polk", "rate|r", "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	m := msg("a", 0)
	m.RateLimitKey = "r"
	push(t, d, m)
	if got := receive(t, d, 10, time.Minute); len(got) != 1 {
		t.Fatalf("claimed %d messages; want the one", len(got))
	}
	if _, err := d.KeyStats(ctx); err != nil {
		t.Fatalf("KeyStats beside a damaged policy: %v", err)
	}
}

// TestURLTheServerRefusesIsInvalidArgument: a database number above the
// server's databases setting, or cluster=true on a server that is not a
// cluster, is the URL's fault (exit 2 in the CLI), not an internal error
// nor an unreachable server.
func TestURLTheServerRefusesIsInvalidArgument(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(testBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, path, query, want string }{
		{"database 99999", "/99999", "queue=q", "database 99999 does not exist"},
		{"cluster on a single server", "/", "queue=q&cluster=true", "cluster=true, but the server is not a Redis Cluster"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := *base
			u.Path, u.RawQuery = tt.path, tt.query
			_, err := (&Opener{}).Open(testCtx(t), &u, driver.OpenOptions{})
			wantCode(t, "open "+u.Redacted(), err, errcode.InvalidArgument)
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v does not say %q", err, tt.want)
			}
		})
	}
}

// TestRequeueDeadWhoseIDIsQueuedAgain checks that a dead letter whose task
// ID a queued or running message holds again merges into that message, as
// on Postgres, rather than queueing a second copy that would run the task
// twice.
func TestRequeueDeadWhoseIDIsQueuedAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		lease   bool  // the message holding the ID is running
		pushed  bool  // a message holds the ID at all
		ready   int64 // ready messages after the requeue
		running int64
	}{
		{name: "queued again", pushed: true, ready: 1},
		{name: "running again", pushed: true, lease: true, running: 1},
		{name: "not queued", ready: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := openDriver(t)
			ctx := testCtx(t)
			push(t, d, msg("x", 0))
			r := receive(t, d, 1, time.Minute)[0]
			if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: r.Lease, Reason: "failed"}}); errs != nil {
				t.Fatal(errs)
			}
			if tc.pushed {
				push(t, d, msg("x", 0))
			}
			if tc.lease {
				receive(t, d, 1, time.Minute)
			}
			dead, err := d.ListDead(ctx, 10)
			if err != nil || len(dead) != 1 {
				t.Fatalf("list dead: %v, %v", dead, err)
			}
			if n, err := d.RequeueDead(ctx, []string{dead[0].MessageID}); err != nil || n != 1 {
				t.Fatalf("requeue dead: %d, %v; want 1", n, err)
			}
			if s := stats(t, d); s.Ready != tc.ready || s.InFlight != tc.running || s.Dead != 0 {
				t.Fatalf("stats %+v; want %d ready, %d in flight, no dead letter", s, tc.ready, tc.running)
			}
			if res := push(t, d, msg("x", 0)); !res[0].Duplicate {
				t.Fatal("a push of the requeued task's ID was not a duplicate")
			}
		})
	}
}
