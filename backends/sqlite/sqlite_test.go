package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// testBundle is one freshly opened driver on its own file.
type testBundle struct {
	drv  *Driver
	path string
	ctx  context.Context
}

// setup opens a driver on a new file in t's temp dir; query is appended to
// the URL (for example "queue=x&poll=10ms").
func setup(t *testing.T, query string) *testBundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	return &testBundle{drv: openAt(t, path, query), path: path, ctx: t.Context()}
}

// openAt opens another driver on path, closed at the end of the test.
func openAt(t *testing.T, path, query string) *Driver {
	t.Helper()
	u, err := url.Parse("sqlite://" + path + "?" + query)
	if err != nil {
		t.Fatal(err)
	}
	d, err := URLOpener{}.Open(t.Context(), u, driver.OpenOptions{})
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d.(*Driver)
}

func (b *testBundle) push(t *testing.T, msgs ...*driver.Message) []driver.PushResult {
	t.Helper()
	res, err := b.drv.Push(b.ctx, msgs)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return res
}

func (b *testBundle) receive(t *testing.T, max int, vis time.Duration) []*driver.Received {
	t.Helper()
	got, err := b.drv.Receive(b.ctx, driver.ReceiveParams{Max: max, Visibility: vis})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return got
}

func (b *testBundle) stats(t *testing.T) driver.Stats {
	t.Helper()
	s, err := b.drv.Stats(b.ctx)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	s.Known = driver.KnownCounts{}
	return s
}

func msg(id string) *driver.Message { return &driver.Message{ID: id, Body: []byte("body-" + id)} }

func ids(rs []*driver.Received) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func wantCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	if got := codeOf(err); got != code {
		t.Fatalf("error %v: code %v, want %v", err, got, code)
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		path    string
		queue   string
		maxMsg  int
		poll    time.Duration
		wantErr string
	}{
		{url: "sqlite://./work.db", path: "./work.db", queue: "default", maxMsg: DefaultMaxMessageBytes, poll: DefaultPoll},
		{url: "sqlite://work.db?queue=render", path: "work.db", queue: "render", maxMsg: DefaultMaxMessageBytes, poll: DefaultPoll},
		{url: "sqlite://dir/sub/work.db", path: "dir/sub/work.db", queue: "default", maxMsg: DefaultMaxMessageBytes, poll: DefaultPoll},
		{url: "sqlite:///abs/x.db?max_message_bytes=1000&poll=5ms", path: "/abs/x.db", queue: "default", maxMsg: 1000, poll: 5 * time.Millisecond},
		{url: "sqlite:rel.db", path: "rel.db", queue: "default", maxMsg: DefaultMaxMessageBytes, poll: DefaultPoll},
		{url: "sqlite://x.db?busy_timeout=1s&synchronous=full", path: "x.db", queue: "default", maxMsg: DefaultMaxMessageBytes, poll: DefaultPoll},
		{url: "sqlite://x.db?bogus=1&queue=a", wantErr: "unknown query parameter bogus"},
		{url: "sqlite://x.db?max_message_bytes=0", wantErr: "max_message_bytes=0 is out of range"},
		{url: "sqlite://x.db?poll=fast", wantErr: `poll="fast": not a duration`},
		{url: "sqlite://x.db?synchronous=off", wantErr: `synchronous="off" is not normal or full`},
		{url: "sqlite://x.db?queue=", wantErr: "queue is empty"},
		{url: "sqlite://x.db?cache_size=-65536&mmap_size=268435456", path: "x.db", queue: "default", maxMsg: DefaultMaxMessageBytes, poll: DefaultPoll},
		{url: "sqlite://x.db?cache_size=lots", wantErr: "cache_size"},
		{url: "sqlite://x.db?cache_size=99999999999", wantErr: "cache_size"},
		{url: "sqlite://x.db?cache_size=1%3BDROP", wantErr: "cache_size"},
		{url: "sqlite://x.db?mmap_size=-1", wantErr: "mmap_size"},
		{url: "sqlite://x.db?mmap_size=4294967296", wantErr: "mmap_size"},
		{url: "sqlite://x.db?journal_mode=off", wantErr: "unknown query parameter journal_mode"},
		{url: "sqlite://", wantErr: "names no file"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			c, err := parseURL(u)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				wantCode(t, err, errcode.InvalidArgument)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.path != tt.path || c.queue != tt.queue || c.maxMessageBytes != tt.maxMsg || c.poll != tt.poll {
				t.Fatalf("got path %q queue %q max %d poll %v", c.path, c.queue, c.maxMessageBytes, c.poll)
			}
		})
	}
}

func TestOpenMissingDirectory(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("sqlite://" + filepath.Join(t.TempDir(), "nope", "q.db"))
	_, err := URLOpener{}.Open(t.Context(), u, driver.OpenOptions{})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("got %v, want a missing-directory error", err)
	}
	wantCode(t, err, errcode.NotFound)
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	b := setup(t, "max_message_bytes=1234")
	caps := b.drv.Capabilities()
	if caps.MaxMessageBytes != 1234 {
		t.Errorf("MaxMessageBytes %d, want 1234 from the URL", caps.MaxMessageBytes)
	}
	for _, f := range driver.AllFeatures {
		want := driver.Native
		switch f {
		case driver.TransactionalPush:
			want = driver.Unsupported
			if caps.Features[f].Fallback == "" {
				t.Errorf("%s: unsupported without a Fallback text", f)
			}
		}
		if got := caps.Level(f); got != want {
			t.Errorf("%s: %v, want %v", f, got, want)
		}
	}
}

func TestPushReceiveComplete(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	res := b.push(t, msg("a"), msg("b"), msg("c"))
	if len(res) != 3 || res[0].MessageID == "" || res[0].Duplicate {
		t.Fatalf("push results %+v", res)
	}
	got := b.receive(t, 10, time.Minute)
	if !slices.Equal(ids(got), []string{"a", "b", "c"}) {
		t.Fatalf("received %v, want a b c in push order", ids(got))
	}
	r := got[0]
	if string(r.Body) != "body-a" || r.DeliveryCount != 1 || r.EnqueuedAt.IsZero() || r.Lease.MessageID != res[0].MessageID {
		t.Fatalf("received %+v", r)
	}
	if s := b.stats(t); s != (driver.Stats{InFlight: 3}) {
		t.Fatalf("stats %+v, want 3 in flight", s)
	}
	leases := []driver.Lease{got[0].Lease, got[1].Lease, got[2].Lease}
	if errs := b.drv.Complete(b.ctx, driver.Completions(leases...)); errs != nil {
		t.Fatalf("complete: %v", errs)
	}
	// Settling twice: the lease is gone.
	errs := b.drv.Complete(b.ctx, driver.Completions(leases[:1]...))
	if len(errs) != 1 {
		t.Fatalf("second complete: %v, want one LockLost", errs)
	}
	wantCode(t, errs[0], errcode.LockLost)
	if s := b.stats(t); s != (driver.Stats{}) {
		t.Fatalf("stats %+v after complete, want empty", s)
	}
}

func TestEmptyBodyAndBinary(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	bin := []byte{0, 1, 2, 0xff, 'x', 0}
	b.push(t, &driver.Message{ID: "e", Body: nil}, &driver.Message{ID: "bin", Body: bin})
	got := b.receive(t, 2, time.Minute)
	if len(got) != 2 || len(got[0].Body) != 0 || string(got[1].Body) != string(bin) {
		t.Fatalf("bodies changed: %q %q", got[0].Body, got[1].Body)
	}
}

func TestLeaseExpiryAndFencing(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("a"))
	first := b.receive(t, 1, 200*time.Millisecond)
	if len(first) != 1 {
		t.Fatal("nothing received")
	}
	if again := b.receive(t, 1, time.Minute); len(again) != 0 {
		t.Fatalf("message visible while leased: %v", ids(again))
	}
	time.Sleep(300 * time.Millisecond)
	second := b.receive(t, 1, time.Minute)
	if len(second) != 1 || second[0].DeliveryCount != 2 {
		t.Fatalf("after expiry got %+v, want the message with delivery count 2", second)
	}
	if second[0].Lease.Token == first[0].Lease.Token {
		t.Fatal("a new claim reused the old lease token")
	}
	// The first holder's lease is lost for every settlement, and none of
	// them touches the message.
	_, err := b.drv.Renew(b.ctx, first[0].Lease, time.Minute)
	wantCode(t, err, errcode.LockLost)
	wantCode(t, b.drv.Complete(b.ctx, driver.Completions(first[0].Lease))[0], errcode.LockLost)
	wantCode(t, b.drv.Requeue(b.ctx, []driver.RequeueParams{{Lease: first[0].Lease}})[0], errcode.LockLost)
	wantCode(t, b.drv.DeadLetter(b.ctx, []driver.DeadLetterParams{{Lease: first[0].Lease, Reason: "x"}})[0], errcode.LockLost)
	if s := b.stats(t); s != (driver.Stats{InFlight: 1}) {
		t.Fatalf("stats %+v, want the message still in flight for the second holder", s)
	}
	if errs := b.drv.Complete(b.ctx, driver.Completions(second[0].Lease)); errs != nil {
		t.Fatalf("second holder's complete: %v", errs)
	}
}

func TestRenew(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("a"))
	got := b.receive(t, 1, 300*time.Millisecond)
	lease, err := b.drv.Renew(b.ctx, got[0].Lease, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Expiry.After(got[0].Lease.Expiry) {
		t.Fatalf("renewed expiry %v not after %v", lease.Expiry, got[0].Lease.Expiry)
	}
	time.Sleep(400 * time.Millisecond) // past the original lease
	if again := b.receive(t, 1, time.Minute); len(again) != 0 {
		t.Fatal("renewed message was claimed again")
	}
	if errs := b.drv.Complete(b.ctx, driver.Completions(lease)); errs != nil {
		t.Fatal(errs)
	}
}

func TestRequeue(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("now"), msg("later"))
	got := b.receive(t, 2, time.Minute)
	errs := b.drv.Requeue(b.ctx, []driver.RequeueParams{
		{Lease: got[0].Lease, Body: []byte("replaced")},
		{Lease: got[1].Lease, Delay: time.Hour},
	})
	if errs != nil {
		t.Fatal(errs)
	}
	if s := b.stats(t); s != (driver.Stats{Ready: 1, Delayed: 1}) {
		t.Fatalf("stats %+v, want 1 ready and 1 delayed", s)
	}
	again := b.receive(t, 2, time.Minute)
	if len(again) != 1 || again[0].ID != "now" || string(again[0].Body) != "replaced" || again[0].DeliveryCount != 2 {
		t.Fatalf("after requeue got %+v, want only 'now' with the new body and delivery count 2", again)
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("a"), msg("b"), msg("c"))
	got := b.receive(t, 3, time.Minute)
	var reqs []driver.DeadLetterParams
	for _, r := range got {
		reqs = append(reqs, driver.DeadLetterParams{Lease: r.Lease, Reason: "failed " + r.ID, Detail: "tail of output"})
	}
	if errs := b.drv.DeadLetter(b.ctx, reqs); errs != nil {
		t.Fatal(errs)
	}
	if s := b.stats(t); s != (driver.Stats{Dead: 3}) {
		t.Fatalf("stats %+v, want 3 dead", s)
	}
	dead, err := b.drv.ListDead(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 3 || dead[0].ID != "a" || dead[0].Reason != "failed a" || dead[0].Detail != "tail of output" ||
		dead[0].DeliveryCount != 1 || string(dead[0].Body) != "body-a" || dead[0].DeadAt.IsZero() {
		t.Fatalf("dead letters %+v", dead[0])
	}
	n, err := b.drv.RequeueDead(b.ctx, []string{dead[0].MessageID, "999999", "not-ours"})
	if err != nil || n != 1 {
		t.Fatalf("requeue dead: %d, %v; want 1", n, err)
	}
	n, err = b.drv.PurgeDead(b.ctx, []string{dead[1].MessageID})
	if err != nil || n != 1 {
		t.Fatalf("purge dead: %d, %v; want 1", n, err)
	}
	if s := b.stats(t); s != (driver.Stats{Ready: 1, Dead: 1}) {
		t.Fatalf("stats %+v, want 1 ready, 1 dead", s)
	}
	back := b.receive(t, 1, time.Minute)
	if len(back) != 1 || back[0].ID != "a" || back[0].DeliveryCount != dead[0].DeliveryCount+1 {
		t.Fatalf("requeued dead letter came back as %+v; want delivery %d (the count goes on)", back, dead[0].DeliveryCount+1)
	}
	// A dead letter whose task is queued again merges into that message:
	// it is moved, and no second copy is queued.
	b.push(t, msg("c"))
	if n, err := b.drv.RequeueDead(b.ctx, nil); err != nil || n != 1 {
		t.Fatalf("requeue of a dead letter whose task is queued: %d, %v; want 1 (merged)", n, err)
	}
	if s := b.stats(t); s != (driver.Stats{Ready: 1, InFlight: 1}) {
		t.Fatalf("stats %+v, want the queued copy alone ready (and a in flight), no dead letter", s)
	}
}

func TestPriorityAndDelayedPush(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t,
		&driver.Message{ID: "low1", Priority: -5},
		&driver.Message{ID: "mid1"},
		&driver.Message{ID: "high", Priority: 10},
		&driver.Message{ID: "mid2"},
		&driver.Message{ID: "later", Priority: 100, NotBefore: time.Now().Add(400 * time.Millisecond)},
		&driver.Message{ID: "low2", Priority: -5},
	)
	if s := b.stats(t); s != (driver.Stats{Ready: 5, Delayed: 1}) {
		t.Fatalf("stats %+v, want 5 ready, 1 delayed", s)
	}
	peeked, err := b.drv.Peek(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var peekIDs []string
	for _, p := range peeked {
		peekIDs = append(peekIDs, p.ID)
	}
	want := []string{"high", "mid1", "mid2", "low1", "low2", "later"}
	if !slices.Equal(peekIDs, want) {
		t.Fatalf("peek order %v, want %v", peekIDs, want)
	}
	got := b.receive(t, 10, time.Minute)
	if !slices.Equal(ids(got), want[:5]) {
		t.Fatalf("receive order %v, want %v", ids(got), want[:5])
	}
	late, err := b.drv.Receive(b.ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 5 * time.Second})
	if err != nil || len(late) != 1 || late[0].ID != "later" {
		t.Fatalf("delayed message: %v, %v", late, err)
	}
}

func TestDedup(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	res := b.push(t, msg("a"), msg("a"), msg("b"), &driver.Message{Body: []byte("no id")}, &driver.Message{Body: []byte("no id")})
	if res[0].Duplicate || !res[1].Duplicate || res[1].MessageID != res[0].MessageID || res[2].Duplicate || res[3].Duplicate || res[4].Duplicate {
		t.Fatalf("push results %+v: want only the second 'a' duplicate, with the first's message ID", res)
	}
	if dup := b.push(t, msg("a")); !dup[0].Duplicate {
		t.Fatal("a queued task ID was pushed again")
	}
	// In flight still counts as not completed.
	got := b.receive(t, 1, time.Minute)
	if dup := b.push(t, msg("a")); !dup[0].Duplicate {
		t.Fatal("an in-flight task ID was pushed again")
	}
	if errs := b.drv.Complete(b.ctx, driver.Completions(got[0].Lease)); errs != nil {
		t.Fatal(errs)
	}
	if again := b.push(t, msg("a")); again[0].Duplicate {
		t.Fatal("a completed task ID was rejected as a duplicate")
	}
}

func TestPeekStatsClear(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("a"), msg("b"), &driver.Message{ID: "d", NotBefore: time.Now().Add(time.Hour)})
	got := b.receive(t, 1, time.Minute)
	before := b.stats(t)
	peeked, err := b.drv.Peek(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(peeked) != 3 {
		t.Fatalf("peeked %d messages, want 3", len(peeked))
	}
	var inFlight int
	for _, p := range peeked {
		if p.InFlight {
			inFlight++
			if p.ID != "a" || p.DeliveryCount != 1 {
				t.Fatalf("in-flight peeked message %+v", p)
			}
		}
	}
	if inFlight != 1 || b.stats(t) != before || before != (driver.Stats{Ready: 1, InFlight: 1, Delayed: 1}) {
		t.Fatalf("peek changed state or counts are wrong: before %+v after %+v", before, b.stats(t))
	}
	n, err := b.drv.Clear(b.ctx)
	if err != nil || n != 3 {
		t.Fatalf("clear: %d, %v; want 3", n, err)
	}
	wantCode(t, b.drv.Complete(b.ctx, driver.Completions(got[0].Lease))[0], errcode.LockLost)
}

func TestQueuesShareAFile(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=one")
	other := openAt(t, b.path, "queue=two")
	b.push(t, msg("x"))
	if _, err := other.Push(b.ctx, []*driver.Message{msg("x")}); err != nil {
		t.Fatal(err)
	}
	got, err := other.Receive(b.ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("queue two received %d, %v; want its one message", len(got), err)
	}
	if s := b.stats(t); s != (driver.Stats{Ready: 1}) {
		t.Fatalf("queue one stats %+v, want its message untouched", s)
	}
}

func TestReceiveWait(t *testing.T) {
	t.Parallel()
	// rawInsert writes a message the way another process would: no
	// in-process wake-up, so only polling can find it.
	rawInsert := func(t *testing.T, b *testBundle) {
		var db *sql.DB
		b.drv.As(&db)
		now := micros(time.Now())
		_, err := db.ExecContext(b.ctx, `INSERT INTO jobq_messages (queue, task_id, body, id_at, visible_at, enqueued_at)
			VALUES (?, 'w', x'', 0, ?, ?)`, b.drv.cfg.queue, now, now)
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		query string
		push  func(t *testing.T, b *testBundle)
	}{
		{name: "same driver", query: "poll=1h", push: func(t *testing.T, b *testBundle) { b.push(t, msg("w")) }},
		{name: "second driver in process", query: "poll=1h", push: func(t *testing.T, b *testBundle) {
			if _, err := openAt(t, b.path, "").Push(b.ctx, []*driver.Message{msg("w")}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "other process, polling", query: "poll=10ms", push: rawInsert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.query)
			done := make(chan []*driver.Received, 1)
			go func() {
				got, err := b.drv.Receive(b.ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Minute})
				if err != nil {
					t.Error(err)
				}
				done <- got
			}()
			time.Sleep(50 * time.Millisecond) // let the receiver start waiting
			tt.push(t, b)
			if got := <-done; len(got) != 1 || got[0].ID != "w" {
				t.Fatalf("waiting receive got %v", got)
			}
		})
	}
}

// TestReceiveWaitLeaseExpiry: a waiting receiver picks up a message whose
// lease expires while it waits (nothing is written to the file meanwhile).
func TestReceiveWaitLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, "poll=10ms")
	b.push(t, msg("a"))
	b.receive(t, 1, 200*time.Millisecond)
	got, err := b.drv.Receive(b.ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Minute})
	if err != nil || len(got) != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("got %v, %v; want the expired message again", got, err)
	}
}

func TestReceiveWaitTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, "poll=10ms")
	got, err := b.drv.Receive(b.ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 100 * time.Millisecond})
	if err != nil || len(got) != 0 {
		t.Fatalf("empty queue: %v, %v; want nothing and no error", got, err)
	}
}

func TestCanceledAndClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	_, err := b.drv.Push(ctx, []*driver.Message{msg("a")})
	wantCode(t, err, errcode.Canceled)

	// A waiting receiver returns when its context ends, and when the driver
	// closes.
	ctx, cancel = context.WithTimeout(b.ctx, 50*time.Millisecond)
	defer cancel()
	_, err = b.drv.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
	wantCode(t, err, errcode.DeadlineExceeded)

	errc := make(chan error, 1)
	go func() {
		_, err := b.drv.Receive(b.ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := b.drv.Close(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-errc, errcode.FailedPrecondition)
	_, err = b.drv.Stats(b.ctx)
	wantCode(t, err, errcode.FailedPrecondition)
	_, err = b.drv.Push(b.ctx, []*driver.Message{msg("a")})
	wantCode(t, err, errcode.FailedPrecondition)
}

func TestAsSQLDB(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=as")
	b.push(t, msg("a"))
	var db *sql.DB
	if !b.drv.As(&db) || db == nil {
		t.Fatal("As(**sql.DB) failed")
	}
	var n int
	if err := db.QueryRowContext(b.ctx, `SELECT COUNT(*) FROM jobq_messages WHERE queue = 'as'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("count through As: %d, %v", n, err)
	}
	var s string
	if b.drv.As(&s) {
		t.Fatal("As(*string) succeeded")
	}
}

// TestWALSizeLimit checks that every connection caps the WAL file it
// leaves on disk after a checkpoint.
func TestWALSizeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=wal")
	var db *sql.DB
	if !b.drv.As(&db) {
		t.Fatal("As(**sql.DB) failed")
	}
	var limit int64
	if err := db.QueryRowContext(b.ctx, `PRAGMA journal_size_limit`).Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if limit != walSizeLimit {
		t.Fatalf("journal_size_limit = %d, want %d", limit, walSizeLimit)
	}
}

func TestConcurrentReceiversInProcess(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	const n, receivers = 500, 8
	var msgs []*driver.Message
	for i := range n {
		msgs = append(msgs, msg(fmt.Sprint(i)))
	}
	b.push(t, msgs...)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range receivers {
		d := openAt(t, b.path, "") // own pool, like another worker would have
		wg.Go(func() {
			for {
				got, err := d.Receive(b.ctx, driver.ReceiveParams{Max: 3, Visibility: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				var leases []driver.Lease
				mu.Lock()
				for _, r := range got {
					seen[r.ID]++
					leases = append(leases, r.Lease)
				}
				mu.Unlock()
				if errs := d.Complete(b.ctx, driver.Completions(leases...)); errs != nil {
					t.Error(errs)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("claimed %d distinct messages, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("message %s claimed %d times", id, c)
		}
	}
}

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want errcode.Code
	}{
		{driver.Errorf(errcode.LockLost, "x"), errcode.LockLost},
		{fmt.Errorf("wrapped: %w", context.Canceled), errcode.Canceled},
		{errors.New("sql: database is closed"), errcode.FailedPrecondition},
		{sql.ErrConnDone, errcode.FailedPrecondition},
		{errors.New("something else"), errcode.Unknown},
	}
	for _, tt := range tests {
		if got := codeOf(tt.err); got != tt.want {
			t.Errorf("codeOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestConcurrentOpenOfNewFile: drivers that create the same new file at
// once (switching it to WAL and creating the tables) all succeed and see
// one queue.
func TestConcurrentOpenOfNewFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new.db")
	const n = 6
	drivers := make([]*Driver, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			u := &url.URL{Scheme: Scheme, Path: path}
			d, err := URLOpener{}.Open(t.Context(), u, driver.OpenOptions{})
			errs[i] = err
			if err == nil {
				drivers[i] = d.(*Driver)
				t.Cleanup(func() { _ = d.Close() })
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("driver %d: %v", i, err)
		}
		if _, err := drivers[i].Push(t.Context(), []*driver.Message{msg(fmt.Sprint(i))}); err != nil {
			t.Fatalf("push through driver %d: %v", i, err)
		}
	}
	s, err := drivers[0].Stats(t.Context())
	if err != nil || s.Ready != n {
		t.Fatalf("stats %+v, %v; want %d ready", s, err, n)
	}
}

// TestBusyTimeout: while another connection (as another process would)
// holds the file's write lock, a write waits up to busy_timeout and then
// fails with Unavailable; a canceled wait returns at once; once the lock is
// released writes go through.
func TestBusyTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, "busy_timeout=100ms")
	var db *sql.DB
	b.drv.As(&db)
	other, err := db.Conn(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(b.ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	_, err = b.drv.Push(b.ctx, []*driver.Message{msg("blocked")})
	wantCode(t, err, errcode.Unavailable)
	if !strings.Contains(err.Error(), "busy_timeout=100ms") {
		t.Errorf("error %q does not name busy_timeout", err)
	}
	// Nothing was written: the push's caller must not count it as a
	// possible duplicate (push said "sent again after an attempt whose
	// answer was lost").
	if a := driver.AppliedOf(err, b.drv.ErrorCode(err)); a != driver.NotApplied {
		t.Errorf("a push that never got the write lock is %v, want NotApplied", a)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Millisecond)
	defer cancel()
	_, err = b.drv.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute})
	wantCode(t, err, errcode.DeadlineExceeded)

	if _, err := other.ExecContext(b.ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	b.push(t, msg("after"))
	if s := b.stats(t); s != (driver.Stats{Ready: 1}) {
		t.Fatalf("stats %+v, want only the push made after the lock was released", s)
	}
}

// TestNewConnectionsTakeNoWriteLock: while another process holds the
// file's write lock, a connection the pool opens for a read does not wait
// for it. The DSN's auto_vacuum pragma used to run on every connection; on
// an existing file it takes the write lock, so reads on new connections
// (and every process's open) queued behind other processes' writes, and
// dozens of pushes started at once failed "database is locked".
func TestNewConnectionsTakeNoWriteLock(t *testing.T) {
	t.Parallel()
	b := setup(t, "busy_timeout=200ms")
	b.push(t, msg("one"))
	var db *sql.DB
	b.drv.As(&db)
	other, err := sql.Open("sqlite", fileURI(b.path))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.Conn(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(b.ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = lock.ExecContext(b.ctx, "ROLLBACK") }()

	// Connections held at once: the pool must open new ones.
	for i := range 4 {
		c, err := db.Conn(b.ctx)
		if err != nil {
			t.Fatalf("new connection %d while another process writes: %v", i, err)
		}
		defer c.Close()
		var n int
		if err := c.QueryRowContext(b.ctx, "SELECT count(*) FROM jobq_messages").Scan(&n); err != nil || n != 1 {
			t.Fatalf("read on connection %d: %d messages, %v; want 1", i, n, err)
		}
	}
}

// TestCanceledReceivesLeaveNoTransactionOpen cancels receives at every
// moment of their write transaction; writes after them must still work (a
// cancellation just after BEGIN succeeded once left the connection inside a
// transaction, failing every later write).
func TestCanceledReceivesLeaveNoTransactionOpen(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, &driver.Message{ID: "m", Body: []byte(`{}`)})
	for i := range 3000 {
		ctx, cancel := context.WithTimeout(b.ctx, time.Duration(i%300)*time.Microsecond)
		_, _ = b.drv.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Millisecond, Wait: time.Millisecond})
		cancel()
		if _, err := b.drv.Push(b.ctx, []*driver.Message{{ID: fmt.Sprint("p", i), Body: []byte(`{}`)}}); err != nil {
			t.Fatalf("push after canceled receive %d: %v", i, err)
		}
	}
}

// TestFileNameWithQuestionMark: a '?' in the file name ("%3F" in the URL)
// stays in the name, and the connection still gets its pragmas. The DSN used
// to be cut at that '?', opening "a" and dropping the busy timeout.
func TestFileNameWithQuestionMark(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"a?b.db", "c#d%3F.db", "e%f.db"} {
		u := &url.URL{Scheme: Scheme, Path: filepath.Join(dir, name), RawQuery: "busy_timeout=1234ms"}
		u, err := url.Parse(u.String()) // as the user would type it, escaped
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", c.dsn())
		if err != nil {
			t.Fatal(err)
		}
		var ms int
		err = db.QueryRow("PRAGMA busy_timeout").Scan(&ms)
		_ = db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ms != 1234 {
			t.Errorf("%s: busy_timeout is %d ms, want 1234", name, ms)
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			entries, _ := os.ReadDir(dir)
			t.Errorf("%s: the file is not there (%v); the directory holds %v", name, err, entries)
		}
	}
}
