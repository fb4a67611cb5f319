package servicebus_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func TestPushReceiveComplete(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	res, err := q.Push(ctx, &jobq.Task{Command: "echo hi"})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	e := receive(t, q)
	if e.Task.ID != res.ID || e.Task.Command != "echo hi" || e.DeliveryCount != 1 || e.MessageID != res.MessageID {
		t.Fatalf("received %+v (task %+v), pushed %+v", e, e.Task, res)
	}
	if until := time.Until(e.Expiry()); until <= 0 || until > lockDuration+time.Second {
		t.Fatalf("lease expiry in %v, want the queue's lock duration %v", until, lockDuration)
	}
	if err := e.Complete(ctx); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := e.Complete(ctx); err == nil {
		t.Fatal("second complete succeeded")
	}
	if _, err := q.Receive(ctx, jobq.ReceiveOptions{}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("receive on an empty queue = %v, want ErrEmpty", err)
	}
}

func TestRenewFollowsLockAndExpiryLosesLock(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	if _, err := q.Push(ctx, &jobq.Task{Command: "sleep 1"}); err != nil {
		t.Fatal(err)
	}
	e := receive(t, q)
	first := e.Expiry()
	time.Sleep(100 * time.Millisecond)
	if err := e.Renew(ctx, time.Hour); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if !e.Expiry().After(first) || time.Until(e.Expiry()) > lockDuration+time.Second {
		t.Fatalf("renewed expiry %v (was %v): want the lock's real expiry, about %v from now", e.Expiry(), first, lockDuration)
	}
	select {
	case <-e.LockLost():
	case <-time.After(3 * lockDuration):
		t.Fatal("lock-lost signal did not fire after the lock expired")
	}
	again := receive(t, q)
	if again.DeliveryCount != 2 {
		t.Fatalf("redelivery count %d, want 2", again.DeliveryCount)
	}
	if err := e.Complete(ctx); !errors.Is(err, errcode.LockLost) {
		t.Fatalf("complete with an expired lock = %v, want LockLost", err)
	}
	if err := again.Complete(ctx); err != nil {
		t.Fatalf("complete by the new holder: %v", err)
	}
}

func TestFailExhaustsRetriesIntoDeadLetters(t *testing.T) {
	t.Parallel()
	q, logs := open(t, newQueueURL(t))
	ctx := ctxT(t)
	// Retried at once: the queue's backoff, since a task of its own would be v2.
	if err := q.Admin().SetPolicy(ctx, driver.RetryBackoff(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	res, err := q.Push(ctx, &jobq.Task{Command: "false", NumRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		e := receive(t, q)
		if e.DeliveryCount != attempt {
			t.Fatalf("attempt %d has delivery count %d", attempt, e.DeliveryCount)
		}
		fr, err := e.Fail(ctx, errors.New("exit status 1"), "some output")
		if err != nil {
			t.Fatalf("fail: %v", err)
		}
		if fr.Retried != (attempt < 3) {
			t.Fatalf("attempt %d: retried=%v", attempt, fr.Retried)
		}
	}
	if n := strings.Count(logs.String(), "feature=in-place-update"); n != 1 {
		t.Fatalf("in-place-update warning logged %d times, want once:\n%s", n, logs)
	}
	dead, err := q.Admin().DeadLetters(ctx, 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters: %v, %v", dead, err)
	}
	if dead[0].Task == nil || dead[0].Task.ID != res.ID || !strings.Contains(dead[0].Reason, "exit status 1") || dead[0].Detail != "some output" || dead[0].DeliveryCount != 3 {
		t.Fatalf("dead letter %+v", dead[0])
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil || st.Dead != 1 || st.Ready != 0 {
		t.Fatalf("stats %+v, %v; want 1 dead, 0 ready", st, err)
	}
	n, err := q.Admin().RequeueDeadLetters(ctx, dead[0].MessageID)
	if err != nil || n != 1 {
		t.Fatalf("requeue dead letter: %d, %v", n, err)
	}
	e := receive(t, q)
	if e.Task.ID != res.ID || e.DeliveryCount != 1 {
		t.Fatalf("requeued task %s with delivery count %d, want %s with a fresh count", e.Task.ID, e.DeliveryCount, res.ID)
	}
	if err := e.DeadLetter(ctx, "again", ""); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Admin().PurgeDeadLetters(ctx); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
}

func TestDelayedRequeue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, param string
		wantLater   bool
		warning     string
	}{
		{"redeliver", "requeue=redeliver", false, "an abandon, visible at once"},
		{"schedule", "", true, "schedules a copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, logs := open(t, newQueueURL(t, tc.param))
			ctx := ctxT(t)
			res, err := q.Push(ctx, &jobq.Task{Command: "true"})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				e := receive(t, q)
				if err := e.Requeue(ctx, 2*time.Second); err != nil {
					t.Fatalf("requeue: %v", err)
				}
			}
			if n := strings.Count(logs.String(), "feature=delayed-requeue"); n != 1 || !strings.Contains(logs.String(), tc.warning) {
				t.Fatalf("delayed-requeue warning logged %d times, want once saying %q:\n%s", n, tc.warning, logs)
			}
			e, err := q.Receive(ctx, jobq.ReceiveOptions{})
			if gotNow := err == nil; gotNow == tc.wantLater {
				t.Fatalf("receive at once after a delayed requeue: %v", err)
			}
			if tc.wantLater {
				e = receive(t, q)
			}
			if e.Task.ID != res.ID || e.DeliveryCount != 3 {
				t.Fatalf("task %s delivery count %d, want %s and 3", e.Task.ID, e.DeliveryCount, res.ID)
			}
		})
	}
}

func TestDelayedPushPeekStatsClear(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	if _, err := q.PushBatch(ctx, []*jobq.Task{{Command: "a"}, {Command: "b"}, {Command: "c", NotBefore: time.Now().Add(time.Hour)}}, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	peeked, err := q.Admin().Peek(ctx, 10)
	if err != nil || len(peeked) != 3 {
		t.Fatalf("peek: %d, %v", len(peeked), err)
	}
	for _, p := range peeked {
		if p.DeliveryCount != 0 || p.InFlight {
			t.Fatalf("peeked a fresh message with %d deliveries (in flight: %v)", p.DeliveryCount, p.InFlight)
		}
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil || st.Ready != 2 || st.Delayed != 1 {
		t.Fatalf("stats %+v, %v; want 2 ready, 1 delayed", st, err)
	}
	e := receive(t, q)
	if e.Task.Command != "a" {
		t.Fatalf("first received %q, want a", e.Task.Command)
	}
	if peeked, err = q.Admin().Peek(ctx, 1); err != nil || len(peeked) != 1 || !peeked[0].InFlight || peeked[0].DeliveryCount != 1 {
		t.Fatalf("peek of the received message: %+v, %v; want in flight with 1 delivery", peeked, err)
	}
	n, err := q.Admin().Clear(ctx)
	if err != nil || n != 2 {
		t.Fatalf("clear: %d, %v; want 2 (the ready b and the scheduled c)", n, err)
	}
	if err := e.Complete(ctx); err != nil {
		t.Fatalf("complete after clear: %v", err)
	}
	if st, err := q.Admin().Stats(ctx); err != nil || st.Ready+st.Delayed != 0 {
		t.Fatalf("stats after clear %+v, %v", st, err)
	}
}

func TestDuplicateDetection(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	for i := 0; i < 2; i++ {
		if _, err := q.Push(ctx, &jobq.Task{Command: "same"}); err != nil {
			t.Fatal(err)
		}
	}
	peeked, err := q.Admin().Peek(ctx, 10)
	if err != nil || len(peeked) != 1 {
		t.Fatalf("peek after pushing one task twice: %d messages, %v; want 1", len(peeked), err)
	}
}

// TestPoliciesInUserMetadata: keyed tasks are accepted (the worker enforces
// their policies per process), and policies round-trip through the queue's
// user metadata without disturbing its messages.
func TestPoliciesInUserMetadata(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	for _, task := range []*jobq.Task{{Command: "x", ConcurrencyKey: "gpu"}, {Command: "y", RateLimitKey: "api"}} {
		if _, err := q.Push(ctxT(t), task); err != nil {
			t.Errorf("push with a concurrency or rate-limit key: %v", err)
		}
	}
	want := []driver.Policy{{Kind: driver.ConcurrencyPolicy, Key: "gpu", Limit: 2}, {Kind: driver.RatePolicy, Key: "api", Limit: 5, Period: time.Minute}}
	for _, p := range want {
		if err := q.Admin().SetPolicy(ctxT(t), p); err != nil {
			t.Fatalf("set %v: %v", p, err)
		}
	}
	got, err := q.Admin().Policies(ctxT(t))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("policy list = %v, %v; want %v", got, err, want)
	}
	if err := q.Admin().SetPolicy(ctxT(t), driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 5}); !errors.Is(err, errcode.Unimplemented) {
		t.Errorf("set max-depth = %v, want Unimplemented", err)
	}
	if n, err := q.Admin().Size(ctxT(t)); err != nil || n != 2 {
		t.Errorf("queue size after storing policies = %d, %v; want the 2 pushed tasks", n, err)
	}
}

func TestURLErrorsAndEscapeHatch(t *testing.T) {
	t.Parallel()
	url := newQueueURL(t)
	for _, bad := range []string{url + "&bogus=1", url + "&requeue=later", "sb://ns/?" + strings.SplitN(url, "?", 2)[1]} {
		if _, err := jobq.Open(ctxT(t), bad); !errors.Is(err, errcode.InvalidArgument) {
			t.Errorf("open %s = %v, want InvalidArgument", bad, err)
		}
	}
	q, _ := open(t, url)
	var c *azservicebus.Client
	var a *admin.Client
	var r *azservicebus.Receiver
	if !q.As(&c) || c == nil || !q.As(&a) || a == nil || !q.As(&r) || r == nil {
		t.Fatal("As does not reach the SDK clients")
	}
	var s string
	if q.As(&s) {
		t.Fatal("As accepted a *string")
	}
}

// A read (size, stats, peek) creates nothing even with create=true in the
// URL; the error about the missing queue must say that, not ask for the
// create=true the URL already has.
func TestReadOnlyOpenOfMissingQueueExplainsCreate(t *testing.T) {
	t.Parallel()
	if env.live {
		t.Skip("needs a queue name the namespace does not have")
	}
	u := newQueueURL(t) // has create=true
	q, err := jobq.OpenWithOptions(ctxT(t), u, jobq.Options{ReadOnly: true})
	if err == nil {
		q.Close()
		t.Fatalf("read-only open of a missing queue succeeded (and may have created it)")
	}
	if !errors.Is(err, errcode.NotFound) || strings.Contains(err.Error(), "add create=true") || !strings.Contains(err.Error(), "only reads") {
		t.Errorf("read-only open of a missing queue with create=true = %v; want NotFound saying a read does not create it", err)
	}
}

// An admin endpoint that does not answer is named in the error, with the
// parameter that sets it (the SDK's own message names the namespace's
// https URL and the port only in passing).
func TestUnreachableAdminEndpointIsNamed(t *testing.T) {
	t.Parallel()
	if env.live {
		t.Skip("the emulator's plain-HTTP admin endpoint")
	}
	_, err := jobq.Open(ctxT(t), "sb://emulator/t-noadmin?admin=127.0.0.1:1&retries=0")
	if err == nil || !strings.Contains(err.Error(), "admin endpoint 127.0.0.1:1") || !strings.Contains(err.Error(), "admin=HOST:PORT") {
		t.Errorf("open with an unreachable admin endpoint = %v; want an error naming it and the admin= parameter", err)
	}
}

// retries=0 means no retries for the admin requests too: azcore reads a
// MaxRetries of 0 as its default of 3. An admin endpoint that answers 503
// (which azcore retries) gets one request.
func TestNoRetriesMeansNoAdminRetries(t *testing.T) {
	t.Parallel()
	if env.live {
		t.Skip("the emulator's plain-HTTP admin endpoint")
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	admin := strings.TrimPrefix(srv.URL, "http://")
	if _, err := jobq.Open(ctxT(t), "sb://emulator/t-noretry?admin="+admin+"&retries=0&retry_delay=10ms"); err == nil {
		t.Fatal("open against an admin endpoint answering 503 succeeded")
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("open with retries=0 made %d admin requests; want 1 (no retries)", n)
	}
}

// TestDeadLetterDeliveryCounts checks the delivery count a dead letter
// reports: the deliveries the task had, whether jobq dead-lettered it
// during a delivery or Service Bus did after the max delivery count's last
// delivery ended. The latter used to be reported one too high (dlq list
// showed 4 deliveries for a task delivered 3 times on a queue with
// max_delivery_count=3).
func TestDeadLetterDeliveryCounts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		abandons   int  // deliveries abandoned before the last one
		jobqDLQ    bool // the last delivery dead-letters it through jobq
		want       int
		wantReason string
	}{
		{"jobq dead-letters the first delivery", 0, true, 1, "bad"},
		{"jobq dead-letters the third delivery", 2, true, 3, "bad"},
		{"Service Bus dead-letters at the max delivery count", maxDeliveryCount, false, maxDeliveryCount, "MaxDeliveryCountExceeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q, _ := open(t, newQueueURL(t))
			ctx := ctxT(t)
			if _, err := q.Push(ctx, &jobq.Task{Command: "true"}); err != nil {
				t.Fatal(err)
			}
			var r *azservicebus.Receiver
			if !q.As(&r) {
				t.Fatal("no receiver")
			}
			for i := 0; i < c.abandons; i++ {
				msgs, err := r.ReceiveMessages(ctx, 1, nil)
				if err != nil || len(msgs) != 1 {
					t.Fatalf("receive %d: %v, %v", i+1, msgs, err)
				}
				if err := r.AbandonMessage(ctx, msgs[0], nil); err != nil {
					t.Fatal(err)
				}
			}
			if c.jobqDLQ {
				if err := receive(t, q).DeadLetter(ctx, "bad", ""); err != nil {
					t.Fatal(err)
				}
			}
			dead, err := q.Admin().DeadLetters(ctx, 10)
			if err != nil || len(dead) != 1 {
				t.Fatalf("dead letters: %v, %v", dead, err)
			}
			if dead[0].DeliveryCount != c.want || dead[0].Reason != c.wantReason {
				t.Fatalf("dead letter with %d deliveries and reason %q; want %d and %q", dead[0].DeliveryCount, dead[0].Reason, c.want, c.wantReason)
			}
		})
	}
}

// TestRequeueDeadLettersByIDFindsEveryID requeues, by task ID and by
// message ID, dead letters in different receive batches, where the task ID
// names two dead letters. The scan used to stop once it had settled as
// many messages as IDs were given: the two of the task filled the count,
// and the one named by message ID, further on, stayed dead-lettered while
// the requeue reported success.
func TestRequeueDeadLettersByIDFindsEveryID(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	var (
		s *azservicebus.Sender
		r *azservicebus.Receiver
	)
	if !q.As(&s) || !q.As(&r) {
		t.Fatal("no sender or receiver")
	}
	const fillers = 300 // more than one receive batch (256) between them
	msg := func(id, task string) *azservicebus.Message {
		m := &azservicebus.Message{MessageID: &id, Body: []byte(`{"version": 0, "kwargs": "{}", "num_retries": 0}`)}
		if task != "" {
			m.ApplicationProperties = map[string]any{"jobq-task-id": task}
		}
		return m
	}
	var msgs []*azservicebus.Message
	msgs = append(msgs, msg("t-copy-1", "the-task"), msg("t-copy-2", "the-task"))
	for i := range fillers {
		msgs = append(msgs, msg(fmt.Sprintf("filler-%d", i), ""))
	}
	msgs = append(msgs, msg("the-message", ""))
	for i := 0; i < len(msgs); i += 100 {
		b, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs[i:min(i+100, len(msgs))] {
			if err := b.AddMessage(m, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	for dead := 0; dead < len(msgs); {
		got, err := r.ReceiveMessages(ctx, len(msgs)-dead, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got {
			if err := r.DeadLetterMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			dead++
		}
	}
	n, err := q.Admin().RequeueDeadLetters(ctx, "the-task", "the-message")
	if err != nil || n != 3 {
		t.Fatalf("requeue by task ID and message ID: %d, %v; want 3 (the task's two and the message)", n, err)
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil || st.Ready != 3 || st.Dead != fillers {
		t.Fatalf("stats %+v, %v; want 3 ready (requeued) and %d dead letters (the fillers)", st, err, fillers)
	}
}
