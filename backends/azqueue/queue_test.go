package azqueue_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/queueurl"
	"github.com/jobq/jobq/wire"
)

// These tests check the driver's mapping onto Storage Queue directly, with
// the engine's own view (through the SDK client) where it matters.

func shell(cmd string) *jobq.Task { return &jobq.Task{Command: cmd} }

func receive(t *testing.T, q *jobq.Queue, vis time.Duration) *jobq.Envelope {
	t.Helper()
	e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: vis, Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return e
}

func TestPushStoresPlainTextNeverExpiring(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	task := shell("echo hello")
	if _, err := q.Push(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	want, err := wire.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := mainClient(t, q).PeekMessages(t.Context(), nil)
	if err != nil || len(resp.Messages) != 1 {
		t.Fatalf("peek: %v, %d messages", err, len(resp.Messages))
	}
	m := resp.Messages[0]
	if got := *m.MessageText; got != string(want) {
		t.Errorf("stored text = %s, want the task's JSON as plain text %s", got, want)
	}
	// Azure reports "never expires" as 9999-12-31.
	if m.ExpirationTime == nil || m.ExpirationTime.Year() < 9999 {
		t.Errorf("expiration time = %v, want never (time-to-live -1)", m.ExpirationTime)
	}
}

func TestBodiesRoundTrip(t *testing.T) {
	t.Parallel()
	u := newQueueURL(t)
	d, err := openDriver(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	bodies := []struct {
		name string
		body []byte
	}{
		{"json", []byte(`{"a": "<&>'\"", "b": "\u00e9\ud83d\ude00"}`)},
		{"json with raw tab and CR", []byte("{\"a\":\t1,\r\n\"b\": 2}")},
		{"not json", []byte("hello world")},
		{"binary", []byte{0, 1, 2, 0xff, 0xfe, '{'}},
		{"brace then control char", []byte("{\x01}")},
		{"looks like base64", []byte("aGVsbG8=")},
	}
	for _, b := range bodies {
		if _, err := d.Push(t.Context(), []*driver.Message{{ID: b.name, Body: b.body}}); err != nil {
			t.Fatalf("push %s: %v", b.name, err)
		}
	}
	got := map[string]bool{}
	for len(got) < len(bodies) {
		recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 32, Visibility: time.Minute, Wait: 5 * time.Second})
		if err != nil || len(recs) == 0 {
			t.Fatalf("receive: %v (%d of %d bodies seen)", err, len(got), len(bodies))
		}
		for _, r := range recs {
			found := false
			for _, b := range bodies {
				if bytes.Equal(r.Body, b.body) {
					got[b.name], found = true, true
				}
			}
			if !found {
				t.Errorf("received body %q was never pushed", r.Body)
			}
		}
	}
}

func TestRenewKeepsNewestPopReceipt(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	if _, err := q.Push(t.Context(), shell("true")); err != nil {
		t.Fatal(err)
	}
	e := receive(t, q, 2*time.Second)
	before := e.Expiry()
	for range 3 {
		if err := e.Renew(t.Context(), 30*time.Second); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
	if !e.Expiry().After(before) {
		t.Errorf("expiry %v not after %v", e.Expiry(), before)
	}
	// Past the first lease, the message must still be held.
	time.Sleep(2500 * time.Millisecond)
	if _, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Second}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("receive during renewed lease: %v, want ErrEmpty", err)
	}
	if err := e.Complete(t.Context()); err != nil {
		t.Fatalf("complete after renewals (needs the newest pop receipt): %v", err)
	}
}

// pushReceiveOne opens a driver on a fresh queue, pushes one message and
// receives it with the given visibility; the driver closes with the test.
func pushReceiveOne(t *testing.T, visibility time.Duration) (driver.Driver, *driver.Received) {
	t.Helper()
	d, err := openDriver(t.Context(), newQueueURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Push(t.Context(), []*driver.Message{{ID: "x", Body: []byte(`{"x": 1}`)}}); err != nil {
		t.Fatal(err)
	}
	recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: visibility, Wait: 5 * time.Second})
	if err != nil || len(recs) != 1 {
		t.Fatalf("receive: %v, %d", err, len(recs))
	}
	return d, recs[0]
}

func TestStaleLeaseCopySettlesWithNewestReceipt(t *testing.T) {
	t.Parallel()
	d, rec := pushReceiveOne(t, time.Minute)
	old := rec.Lease
	renewed, err := d.Renew(t.Context(), old, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if renewed.Token == old.Token {
		t.Fatal("renew did not change the pop receipt")
	}
	// A settlement that raced with the renewal still holds the old copy.
	if errs := d.Complete(t.Context(), driver.Completions(old)); errs != nil {
		t.Fatalf("complete with the pre-renewal lease copy: %v", errs)
	}
}

func TestExpiredLeaseIsLockLost(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	if _, err := q.Push(t.Context(), shell("true")); err != nil {
		t.Fatal(err)
	}
	e := receive(t, q, time.Second)
	time.Sleep(1200 * time.Millisecond)
	// Nobody re-claimed it: Azure would accept the receipt, the fence does not.
	if err := e.Complete(t.Context()); !errors.Is(err, errcode.LockLost) {
		t.Fatalf("complete after expiry: %v, want LockLost", err)
	}
	e2 := receive(t, q, time.Minute)
	if e2.DeliveryCount != 2 {
		t.Errorf("delivery count = %d, want 2", e2.DeliveryCount)
	}
	if err := e.Renew(t.Context(), time.Minute); err == nil {
		t.Error("renew of the first lease after a re-claim succeeded")
	}
	if err := e2.Complete(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestReclaimedLeaseIsLockLostOnService(t *testing.T) {
	t.Parallel()
	d, first := pushReceiveOne(t, time.Second)
	time.Sleep(1100 * time.Millisecond)
	again, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 5 * time.Second})
	if err != nil || len(again) != 1 {
		t.Fatalf("second receive: %v", err)
	}
	// A hand-made lease skips the local expiry check: the service's
	// PopReceiptMismatch must map to LockLost.
	stale := driver.Lease{MessageID: first.Lease.MessageID, Token: first.Lease.Token, Expiry: time.Now().Add(time.Hour)}
	errs := d.Complete(t.Context(), driver.Completions(stale))
	if len(errs) != 1 || errcode.Of(errs[0]) != errcode.LockLost {
		t.Fatalf("complete with a re-claimed receipt: %v, want LockLost", errs)
	}
	// Renew rewrites the text, which a hand-made lease does not carry.
	if _, err := d.Renew(t.Context(), stale, time.Minute); errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("renew with a hand-made lease: %v, want InvalidArgument", err)
	}
	if errs := d.Complete(t.Context(), driver.Completions(again[0].Lease)); errs != nil {
		t.Fatalf("complete by the new holder: %v", errs)
	}
}

func TestFailDecrementsRetriesInPlace(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	// Retried at once: the queue's backoff, since a task of its own would be v2.
	if err := q.Admin().SetPolicy(t.Context(), driver.RetryBackoff(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	task := &jobq.Task{Command: "false", NumRetries: 2}
	if _, err := q.Push(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	e := receive(t, q, time.Minute)
	// The worker records each attempt; on a queue ai4s-jobq may share, a v1
	// task must stay v1 all the same (ai4s-jobq reads only v1).
	hooks.RecordAttempt(e, jobq.Attempt{Outcome: jobq.OutcomeFailure, Detail: "exit 1"})
	res, err := e.Fail(t.Context(), errors.New("exit 1"), "")
	if err != nil || !res.Retried || res.RetriesLeft != 1 {
		t.Fatalf("fail: %+v, %v", res, err)
	}
	e = receive(t, q, time.Minute)
	if e.Task.NumRetries != 1 {
		t.Errorf("num_retries after one failure = %d, want 1 (updated in place)", e.Task.NumRetries)
	}
	if e.Task.Version != 1 {
		t.Errorf("after a recorded attempt the task is schema v%d; a v1 task on Storage Queue must stay v1", e.Task.Version)
	}
	if e.Task.ID != task.ID {
		t.Errorf("task ID changed from %s to %s", task.ID, e.Task.ID)
	}
	if err := e.Complete(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestDelayedPushAndRequeue(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	if _, err := q.Push(t.Context(), &jobq.Task{Command: "later", NotBefore: time.Now().Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("receive before NotBefore: %v, want ErrEmpty", err)
	}
	e := receive(t, q, time.Minute)
	if err := e.Requeue(t.Context(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("receive during the requeue delay: %v, want ErrEmpty", err)
	}
	e = receive(t, q, time.Minute)
	if e.DeliveryCount != 2 {
		t.Errorf("delivery count = %d, want 2", e.DeliveryCount)
	}
	if err := e.Complete(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestDeadLetterKeepsTaskAndReason(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	task := shell("exit 3")
	if _, err := q.Push(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	orig, _ := wire.Marshal(task)
	e := receive(t, q, time.Minute)
	detail := strings.Repeat("output line\n", 10)
	if err := e.DeadLetter(t.Context(), "exit status 3", detail); err != nil {
		t.Fatal(err)
	}
	// On the engine: a message in QUEUE-failed that is still the task's
	// JSON (readable by ai4s-jobq), with the reason appended.
	resp, err := deadClient(t, q).PeekMessages(t.Context(), nil)
	if err != nil || len(resp.Messages) != 1 {
		t.Fatalf("peek failed queue: %v, %d", err, len(resp.Messages))
	}
	text := *resp.Messages[0].MessageText
	if !strings.HasPrefix(text, string(orig[:len(orig)-1])) || !strings.Contains(text, `"error": "exit status 3"`) {
		t.Errorf("dead letter text = %s, want the task JSON with an error key", text)
	}
	dead, err := q.Admin().DeadLetters(t.Context(), 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("list: %v, %d", err, len(dead))
	}
	dl := dead[0]
	if dl.Reason != "exit status 3" || dl.Detail != detail {
		t.Errorf("reason, detail = %q, %q", dl.Reason, dl.Detail)
	}
	if dl.Task == nil || dl.Task.ID != task.ID {
		t.Errorf("dead task = %+v, want ID %s", dl.Task, task.ID)
	}
	// Requeue by task ID: the original bytes go back.
	n, err := q.Admin().RequeueDeadLetters(t.Context(), task.ID)
	if err != nil || n != 1 {
		t.Fatalf("requeue dead: %d, %v", n, err)
	}
	resp2, err := mainClient(t, q).PeekMessages(t.Context(), nil)
	if err != nil || len(resp2.Messages) != 1 {
		t.Fatalf("peek main: %v", err)
	}
	if got := *resp2.Messages[0].MessageText; got != string(orig) {
		t.Errorf("requeued text = %s, want the original %s", got, orig)
	}
	if st, _ := q.Admin().Stats(t.Context()); st.Dead != 0 {
		t.Errorf("dead count after requeue = %d, want 0", st.Dead)
	}
}

func TestDeadLettersBeyondPeekLimit(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	dlq := deadClient(t, q)
	// 40 dead letters written as ai4s-jobq writes them: the bare task.
	var ids []string
	for i := range 40 {
		task := shell("echo " + strings.Repeat("x", i))
		body, _ := wire.Marshal(task)
		ids = append(ids, task.ID)
		if _, err := dlq.EnqueueMessage(t.Context(), string(body), &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(-1))}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := q.Admin().DeadLetters(t.Context(), 100)
	if err != nil || len(all) != 40 {
		t.Fatalf("list 100: %v, %d letters, want 40", err, len(all))
	}
	if all[0].Reason == "" {
		t.Error("a letter without a recorded reason should say so")
	}
	// The scan made them visible again: a peek still sees them.
	if again, err := q.Admin().DeadLetters(t.Context(), 5); err != nil || len(again) != 5 {
		t.Fatalf("list 5 after the scan: %v, %d", err, len(again))
	}
	n, err := q.Admin().PurgeDeadLetters(t.Context(), ids[35], all[0].MessageID, "no-such-id")
	if err != nil || n != 2 {
		t.Fatalf("purge two: %d, %v", n, err)
	}
	n, err = q.Admin().PurgeDeadLetters(t.Context())
	if err != nil || n != 38 {
		t.Fatalf("purge all: %d, %v, want 38", n, err)
	}
}

func TestStatsPeekClear(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	tasks := []*jobq.Task{shell("a"), shell("b"), shell("c")}
	if _, err := q.PushBatch(t.Context(), tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := q.Admin().Stats(t.Context())
	if err != nil || st.Ready != 3 || !st.Known.Ready || st.Known.InFlight {
		t.Fatalf("stats = %+v, %v", st, err)
	}
	ps, err := q.Admin().Peek(t.Context(), 50)
	if err != nil || len(ps) != 3 {
		t.Fatalf("peek: %v, %d", err, len(ps))
	}
	for _, p := range ps {
		if p.Task == nil || p.MessageID == "" {
			t.Errorf("peeked %+v", p)
		}
	}
	if n, err := q.Admin().Clear(t.Context()); err != nil || n != -1 {
		t.Fatalf("clear = %d, %v; want -1 (Azure does not count)", n, err)
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 0 {
		t.Fatalf("size after clear = %d, %v", n, err)
	}
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	q, u := openQueue(t)
	big := &jobq.Task{Command: "echo " + strings.Repeat("x", 70*1024)}
	_, err := q.Push(t.Context(), big)
	if !errors.Is(err, errcode.TooLarge) {
		t.Fatalf("push 70 KiB: %v, want TooLarge", err)
	}
	// The driver enforces the limit on the encoded text too (base64 grows
	// a non-JSON body by a third).
	d, err := openDriver(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = d.Push(t.Context(), []*driver.Message{{ID: "bin", Body: bytes.Repeat([]byte{0}, 50*1024)}})
	if errcode.Of(err) != errcode.TooLarge || !strings.Contains(err.Error(), "65536") {
		t.Fatalf("push 50 KiB binary: %v, want TooLarge naming the limit", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url, want string
	}{
		{"azqueue://devstoreaccount1/q1?bogus=1", "unknown query parameter bogus"},
		{"azqueue://devstoreaccount1/Bad_Name", "invalid queue name"},
		{"azqueue://devstoreaccount1/" + strings.Repeat("a", 60), "at most 56"},
		{"azqueue://devstoreaccount1/", "no queue name"},
		{"azqueue://devstoreaccount1/q1?poll_min=2s&poll_max=1s", "poll_max"},
		{"azqueue://devstoreaccount1/q1?endpoint=ftp://x", "endpoint"},
	}
	for _, c := range cases {
		_, err := jobq.Open(t.Context(), c.url)
		if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("open %s: %v, want InvalidArgument mentioning %q", c.url, err, c.want)
		}
	}
}

// TestBareFormAndClosed: ai4s-jobq's bare ACCOUNT/QUEUE form, which the
// CLI rewrites (internal/queueurl), opens the same queue.
func TestBareFormAndClosed(t *testing.T) {
	t.Parallel()
	u := newQueueURL(t)
	bare := strings.TrimPrefix(u, "azqueue://")
	q, err := jobq.Open(t.Context(), queueurl.Normalize(bare))
	if err != nil {
		t.Fatalf("open %s: %v", bare, err)
	}
	if _, err := q.Push(t.Context(), shell("x")); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(t.Context(), shell("y")); !errors.Is(err, errcode.FailedPrecondition) {
		t.Fatalf("push after close: %v, want FailedPrecondition", err)
	}
}

func TestAs(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	if got := mainClient(t, q).URL(); !strings.Contains(got, q.Name()) {
		t.Errorf("main client URL %s does not name the queue %s", got, q.Name())
	}
	if got := deadClient(t, q).URL(); !strings.HasSuffix(strings.TrimRight(got, "/"), q.Name()+"-failed") {
		t.Errorf("dead-letter client URL %s, want .../%s-failed", got, q.Name())
	}
	var s string
	if q.As(&s) {
		t.Error("As(*string) = true")
	}
}

// A v1 task on Storage Queue keeps no attempt history (it must stay v1 for
// ai4s-jobq), so peek and the dead letters must not infer one: its earlier
// deliveries failed and were settled, none of their leases expired.
func TestV1TaskShowsNoInferredLeaseExpiries(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	if err := q.Admin().SetPolicy(t.Context(), driver.RetryBackoff(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(t.Context(), &jobq.Task{Command: "exit 3", NumRetries: 1}); err != nil {
		t.Fatal(err)
	}
	e := receive(t, q, time.Minute)
	hooks.RecordAttempt(e, jobq.Attempt{Outcome: jobq.OutcomeFailure, Detail: "exit 3"})
	if res, err := e.Fail(t.Context(), errors.New("exit 3"), ""); err != nil || !res.Retried {
		t.Fatalf("fail: %+v, %v", res, err)
	}
	var peeked []*jobq.PeekedTask
	for deadline := time.Now().Add(5 * time.Second); len(peeked) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if peeked, err = q.Admin().Peek(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(peeked) != 1 {
		t.Fatalf("peek: %d messages, want the retried one", len(peeked))
	}
	if as := peeked[0].Attempts(q); len(as) != 0 {
		t.Errorf("peeked v1 task's attempts = %+v, want none (v1 tasks keep no history)", as)
	}
	e = receive(t, q, time.Minute)
	if err := e.DeadLetter(t.Context(), "exit 3", ""); err != nil {
		t.Fatal(err)
	}
	dead, err := q.Admin().DeadLetters(t.Context(), 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters: %d, %v", len(dead), err)
	}
	if as := dead[0].Attempts(q); len(as) != 0 {
		t.Errorf("dead v1 task's attempts = %+v, want none, not a made-up lease expiry", as)
	}
}

// A read (size, stats) of a queue that does not exist creates nothing; its
// error must say the queue is missing, not only "HTTP 404 QueueNotFound".
func TestStatsOfMissingQueueSaysSo(t *testing.T) {
	t.Parallel()
	q, err := jobq.OpenWithOptions(t.Context(), newQueueURL(t), jobq.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = q.Admin().Stats(t.Context())
	if !errors.Is(err, errcode.NotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("stats of a missing queue = %v; want NotFound saying the queue does not exist", err)
	}
}

// A retry backoff, or a requeue, may ask for a delay longer than the 7 days
// Azure can hide a message. Refused, the settlement failed and the task came
// back at its lease's end without using up a retry, forever; the delay is
// shortened to 7 days instead, and the task stays queued.
func TestDelaysOverSevenDaysAreShortened(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		settle func(*jobq.Envelope) (time.Duration, error)
	}{
		{"retry backoff", func(e *jobq.Envelope) (time.Duration, error) {
			res, err := e.Fail(t.Context(), errors.New("exit 1"), "")
			if err == nil && !res.Retried {
				t.Errorf("fail: %+v, want a retry", res)
			}
			return res.Delay, err
		}},
		{"requeue", func(e *jobq.Envelope) (time.Duration, error) {
			return azq.MaxVisibility, e.Requeue(t.Context(), 30*24*time.Hour)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, _ := openQueue(t)
			if err := q.Admin().SetPolicy(t.Context(), driver.RetryBackoff(30*24*time.Hour, 30*24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Push(t.Context(), &jobq.Task{Command: "false", NumRetries: 2}); err != nil {
				t.Fatal(err)
			}
			e := receive(t, q, time.Minute)
			delay, err := tc.settle(e)
			if err != nil {
				t.Fatalf("settle with a delay over 7 days: %v", err)
			}
			if delay != azq.MaxVisibility {
				t.Errorf("delay = %v, want Azure's maximum %v", delay, azq.MaxVisibility)
			}
			if _, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute}); !errors.Is(err, jobq.ErrEmpty) {
				t.Fatalf("receive after the long requeue: %v, want ErrEmpty (the task is delayed)", err)
			}
			if n, err := q.Admin().Size(t.Context()); err != nil || n != 1 {
				t.Errorf("size = %d, %v; want the delayed task counted", n, err)
			}
		})
	}
}

// TestLargePoisonMessageIsDeadLettered: a foreign message of 60 KB that is
// neither JSON nor base64 is poison. Its dead letter cannot carry a reason;
// stored re-encoded as base64 it grew past 64 KiB, was refused, and the
// message came back at every lease, forever. It is kept as it came.
func TestLargePoisonMessageIsDeadLettered(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	text := "not json " + strings.Repeat("z", 60000)
	if _, err := mainClient(t, q).EnqueueMessage(t.Context(), text, &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(-1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("receive of a poison message: %v, want ErrEmpty (dead-lettered)", err)
	}
	peek, err := deadClient(t, q).PeekMessages(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(peek.Messages) != 1 || *peek.Messages[0].MessageText != text {
		t.Fatalf("QUEUE-failed holds %d messages; want the poison message's text as it was", len(peek.Messages))
	}
	props, err := mainClient(t, q).GetProperties(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := *props.ApproximateMessagesCount; n != 0 {
		t.Errorf("main queue holds %d messages after the dead-lettering, want 0", n)
	}
	// Requeued, it goes back as it came (re-encoded as base64 it was too
	// large to store, and the requeue failed).
	if n, err := q.Admin().RequeueDeadLetters(t.Context()); err != nil || n != 1 {
		t.Fatalf("requeue the poison letter: %d, %v; want 1", n, err)
	}
	peek, err = mainClient(t, q).PeekMessages(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(peek.Messages) != 1 || *peek.Messages[0].MessageText != text {
		t.Fatalf("main queue holds %d messages after the requeue; want the poison message's text as it was", len(peek.Messages))
	}
}

// TestRequeueDeadCountsOnlyMoved: a dead letter whose requeue failed was
// counted as requeued. With the main queue gone the requeue fails, reports
// 0, and the letter stays.
func TestRequeueDeadCountsOnlyMoved(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	if _, err := q.Push(t.Context(), shell("false")); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, q, time.Minute).DeadLetter(t.Context(), "failed", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := mainClient(t, q).Delete(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	n, err := q.Admin().RequeueDeadLetters(t.Context())
	if err == nil || n != 0 {
		t.Fatalf("requeue into a deleted queue: %d, %v; want 0 and an error", n, err)
	}
	letters, err := q.Admin().DeadLetters(t.Context(), 10)
	if err != nil || len(letters) != 1 {
		t.Fatalf("dead letters after the failed requeue: %d, %v; want the letter kept", len(letters), err)
	}
}

// TestHeldTaskFarAheadStaysHeld: a task held until its parent ends, with a
// not-before more than 7 days ahead, cannot be pushed when the parent ends
// (Azure delays a message by at most 7 days). Released anyway, its push
// failed and took the sweep down at every pass, the tasks beside it
// included; it stays held instead, and the others are released.
func TestHeldTaskFarAheadStaysHeld(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	parent := shell("echo parent")
	if _, err := q.Push(t.Context(), parent); err != nil {
		t.Fatal(err)
	}
	later := &jobq.Task{Command: "echo later", After: []string{parent.ID}, NotBefore: time.Now().Add(8 * 24 * time.Hour)}
	soon := &jobq.Task{Command: "echo soon", After: []string{parent.ID}}
	if _, err := q.PushBatch(t.Context(), []*jobq.Task{later, soon}, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, q, time.Minute).Complete(t.Context()); err != nil {
		t.Fatal(err)
	}
	for pass := range 2 {
		res, err := q.Admin().SweepHeld(t.Context())
		if err != nil {
			t.Fatalf("sweep %d: %v", pass, err)
		}
		want := []string{soon.ID}
		if pass > 0 {
			want = nil
		}
		if fmt.Sprint(res.Released) != fmt.Sprint(want) {
			t.Errorf("sweep %d released %v, want %v (the far one stays held)", pass, res.Released, want)
		}
	}
	e := receive(t, q, time.Minute)
	if e.Task.ID != soon.ID {
		t.Fatalf("received %s, want the released task %s", e.Task.ID, soon.ID)
	}
}
