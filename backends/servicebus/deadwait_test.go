package servicebus_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/servicebus"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
)

// TestWaitEndsForATaskTheBrokerDeadLetters: Service Bus dead-letters a
// message itself when it was delivered as often as the max delivery count
// allows, or when its time-to-live runs out on a queue that dead-letters
// expired messages, so no worker writes its record. Wait used to wait for
// it for ever; it now finds it in the dead letters, reports it with the
// broker's reason and stores that record.
func TestWaitEndsForATaskTheBrokerDeadLetters(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, reason string
		deliveries   int
	}{
		{"max delivery count", "MaxDeliveryCountExceeded", maxDeliveryCount},
		{"time-to-live", "TTLExpiredException", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			url := newQueueURL(t, resultsParam(t))
			if c.deliveries == 0 {
				url = expiringQueueURL(ctx, t, url)
			}
			q, _ := open(t, url)
			pushed, err := q.Push(ctx, &jobq.Task{Command: "true"})
			if err != nil {
				t.Fatal(err)
			}
			done := waitInBackground(ctx, q, pushed.ID)
			abandon(ctx, t, q, c.deliveries)
			w := <-done
			if w.err != nil {
				t.Fatalf("wait for a task Service Bus dead-lettered: %v", w.err)
			}
			got := w.res[0]
			if got.State != driver.ResultDeadLettered || !strings.Contains(got.Error, c.reason) || got.DeliveryCount != c.deliveries {
				t.Fatalf("wait reported %s with %d deliveries, error %q; want dead-lettered with %d, reason %s",
					got.State, got.DeliveryCount, got.Error, c.deliveries, c.reason)
			}
			rec, err := q.Result(ctx, pushed.ID)
			if err != nil || rec.State != driver.ResultDeadLettered || rec.Error != got.Error {
				t.Fatalf("result after the wait: %+v, %v; want the dead-lettered record the wait reported", rec, err)
			}
		})
	}
}

// abandon receives q's one message and abandons it n times.
func abandon(ctx context.Context, t *testing.T, q *jobq.Queue, n int) {
	t.Helper()
	var r *azservicebus.Receiver
	if !q.As(&r) {
		t.Fatal("no receiver")
	}
	for i := 0; i < n; i++ {
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive %d: %v, %v", i+1, msgs, err)
		}
		if err := r.AbandonMessage(ctx, msgs[0], nil); err != nil {
			t.Fatal(err)
		}
	}
}

// expiringQueueURL creates a queue whose messages expire after a second
// into its dead letters, and returns base's URL with that queue instead.
func expiringQueueURL(ctx context.Context, t *testing.T, base string) string {
	t.Helper()
	other, _ := open(t, newQueueURL(t))
	var adm *admin.Client
	if !other.As(&adm) {
		t.Fatal("no admin client")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t-" + hex.EncodeToString(b)
	if _, err := adm.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		DefaultMessageTimeToLive: to.Ptr("PT1S"), DeadLetteringOnMessageExpiration: to.Ptr(true),
		LockDuration: to.Ptr("PT5S"), MaxDeliveryCount: to.Ptr(int32(maxDeliveryCount)),
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteQueue(context.Background(), name, nil) })
	_, query, _ := strings.Cut(base, "?")
	return "sb://emulator/" + name + "?" + query
}

// TestGroupWaitEndsForATaskTheBrokerDeadLetters: a group's counts on Service
// Bus come from its members' records, so a member the broker dead-lettered
// used to stay open and WaitGroup never returned; it now finds the member
// in the dead letters and records its end.
func TestGroupWaitEndsForATaskTheBrokerDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	q, _ := open(t, newQueueURL(t, resultsParam(t)))
	if _, err := q.Push(ctx, &jobq.Task{Command: "true", Group: "render"}); err != nil {
		t.Fatal(err)
	}
	type waited struct {
		c   *driver.GroupCounters
		err error
	}
	done := make(chan waited, 1)
	go func() {
		c, err := q.Admin().WaitGroup(ctx, "render", 0, nil)
		done <- waited{c, err}
	}()
	abandon(ctx, t, q, maxDeliveryCount)
	w := <-done
	if w.err != nil || w.c.Pushed != 1 || w.c.DeadLettered != 1 {
		t.Fatalf("group wait = %+v, %v; want 1 task pushed and dead-lettered", w.c, w.err)
	}
}

// TestWaitFindsABrokerDeadLetterBehindManyPages: a wait reads a page of
// the dead letters at each look. It used to go through them from the first
// page to the last and start again, so on a dead-letter queue of many
// pages a task the broker dead-lettered while the wait went on (last in
// the queue) was found only after as many looks as there were pages
// before it. The wait now also reads from the end of the letters older
// than itself, and finds it at the next look.
func TestWaitFindsABrokerDeadLetterBehindManyPages(t *testing.T) {
	t.Parallel()
	const (
		old   = 100 // dead letters from an hour ago
		page  = 5   // letters a look reads a page: old/page pages
		looks = 3   // within which the wait must find the task once dead
	)
	ctx := ctxT(t)
	q, _ := open(t, newQueueURL(t, resultsParam(t)))
	deadLetterAt(ctx, t, q, old, time.Now().Add(-time.Hour))
	pushed, err := q.Push(ctx, &jobq.Task{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	second, dead := make(chan struct{}), make(chan struct{})
	var n atomic.Int64
	hooks.DeadLookTest(q, 0, time.Millisecond, page, func(look int) {
		n.Store(int64(look))
		switch {
		case look == 2: // the first look has found where the wait began
			close(second)
			select {
			case <-dead:
			case <-wctx.Done():
			}
		case look > 1+looks:
			cancel()
		}
	})
	done := waitInBackground(wctx, q, pushed.ID)
	select {
	case <-second:
	case w := <-done:
		t.Fatalf("wait ended before its second look at the dead letters: %v, %v", w.res, w.err)
	}
	abandon(ctx, t, q, maxDeliveryCount)
	close(dead)
	w := <-done
	if w.err != nil {
		t.Fatalf("wait for a task Service Bus dead-lettered behind %d pages of dead letters: not found within %d looks (%v)", old/page, looks, w.err)
	}
	if got := w.res[0]; got.State != driver.ResultDeadLettered || !strings.Contains(got.Error, "MaxDeliveryCountExceeded") {
		t.Fatalf("wait reported %s, error %q; want dead-lettered by the broker", got.State, got.Error)
	}
	t.Logf("found at look %d, %d after it was dead-lettered", n.Load(), n.Load()-1)
}

// deadLetterAt pushes n tasks to q and dead-letters them as a jobq worker
// did at time at.
func deadLetterAt(ctx context.Context, t *testing.T, q *jobq.Queue, n int, at time.Time) {
	t.Helper()
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("echo %d %d", at.UnixNano(), i)}
	}
	if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	var r *azservicebus.Receiver
	if !q.As(&r) {
		t.Fatal("no receiver")
	}
	props := map[string]any{servicebus.PropDeadAt: at.UTC()}
	for left := n; left > 0; {
		msgs, err := r.ReceiveMessages(ctx, left, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: to.Ptr("old"), PropertiesToModify: props}); err != nil {
				t.Fatal(err)
			}
		}
		left -= len(msgs)
	}
}

// TestDeadSinceFindsTheRecentLetters: DeadSince returns the cursor after
// which PageDead reads the letters dead-lettered since a time, and only
// those, with gaps in the sequence numbers among the old ones.
func TestDeadSinceFindsTheRecentLetters(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	q, _ := open(t, newQueueURL(t, resultsParam(t)))
	ds := hooks.Driver(q).(driver.DeadSincer)
	pager := hooks.Driver(q).(driver.Pager)
	now := time.Now()
	recent := func(since time.Time) []string {
		t.Helper()
		after, err := ds.DeadSince(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		ms, _, err := pager.PageDead(ctx, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		for _, m := range ms {
			reasons = append(reasons, m.Reason)
		}
		return reasons
	}
	if got := recent(now); len(got) != 0 {
		t.Fatalf("no dead letters: read %v", got)
	}
	deadLetterAt(ctx, t, q, 37, now.Add(-2*time.Hour))
	if got := recent(now); len(got) != 0 {
		t.Fatalf("only old dead letters: read %d after the cursor, want none", len(got))
	}
	// Gaps: purge every third old letter.
	all, err := q.Admin().DeadLetters(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var gone []string
	for i, d := range all {
		if i%3 == 1 {
			gone = append(gone, d.MessageID)
		}
	}
	if _, err := hooks.Driver(q).PurgeDead(ctx, gone); err != nil {
		t.Fatal(err)
	}
	deadLetterAt(ctx, t, q, 5, now.Add(-time.Hour))
	if got := recent(now.Add(-90 * time.Minute)); len(got) != 5 {
		t.Fatalf("37 letters of two hours ago, some purged, then 5 of an hour ago: read %d since 90 minutes ago, want 5", len(got))
	}
	if got := recent(now.Add(-3 * time.Hour)); len(got) != 37-len(gone)+5 {
		t.Fatalf("read %d since before the first letter, want all %d", len(got), 37-len(gone)+5)
	}
}

// TestSweepDecidesOnAParentTheBrokerDeadLetters: a task the broker
// dead-letters has no record, so the held tasks after it (--after) and its
// group's step stayed held until some wait found it in the dead letters. A
// sweep now looks there itself: the dependant is cancelled, naming the
// parent, and a step that runs whatever the ends is released.
func TestSweepDecidesOnAParentTheBrokerDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	q, _ := open(t, newQueueURL(t, resultsParam(t)))
	parent, err := q.Push(ctx, &jobq.Task{Command: "true", Group: "sims"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := q.Push(ctx, &jobq.Task{Command: "echo after", After: []string{parent.ID}})
	if err != nil {
		t.Fatal(err)
	}
	step, err := q.Admin().ThenGroup(ctx, "sims", &jobq.Task{Command: "echo step"}, driver.RequireEnded)
	if err != nil {
		t.Fatal(err)
	}
	abandon(ctx, t, q, maxDeliveryCount)
	var released, cancelled []string
	for !slices.Contains(cancelled, child.ID) || !slices.Contains(released, step.ID) {
		if ctx.Err() != nil {
			t.Fatalf("sweeps released %v and cancelled %v; want the step %s released and the dependant %s cancelled", released, cancelled, step.ID, child.ID)
		}
		res, err := q.Admin().SweepHeld(ctx)
		if err != nil {
			t.Fatal(err)
		}
		released, cancelled = append(released, res.Released...), append(cancelled, res.Cancelled...)
		time.Sleep(100 * time.Millisecond)
	}
	rec, err := q.Result(ctx, child.ID)
	if err != nil || rec.State != driver.ResultCancelled || !strings.Contains(rec.Error, parent.ID) {
		t.Fatalf("dependant's record: %+v, %v; want cancelled naming its parent", rec, err)
	}
	if rec, err := q.Result(ctx, parent.ID); err != nil || rec.State != driver.ResultDeadLettered {
		t.Fatalf("parent's record: %+v, %v; want dead-lettered", rec, err)
	}
}

// TestWaitFindsALetterThatLandsAmongThoseRead: Azure keeps a message's
// sequence number when it dead-letters it, so of tasks A then B, B
// dead-lettered first and A later lands before B's letter, among the
// recent letters a wait has already read past. The wait reads them from
// their start again once it has read them all, and finds A within a few
// looks, not only when its pages of all the letters (20 here) reach it.
func TestWaitFindsALetterThatLandsAmongThoseRead(t *testing.T) {
	t.Parallel()
	const (
		old   = 100 // dead letters from an hour ago
		page  = 5   // letters a look reads a page: old/page pages
		looks = 3   // within which the wait must find A once dead
	)
	ctx := ctxT(t)
	q, _ := open(t, newQueueURL(t, resultsParam(t)))
	deadLetterAt(ctx, t, q, old, time.Now().Add(-time.Hour))
	a, err := q.Push(ctx, &jobq.Task{Command: "echo a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.Push(ctx, &jobq.Task{Command: "echo b"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The wait stops at look 2 (the first found where the recent letters
	// start) until B is dead, and at look aLook until A is.
	const aLook = 4
	stopped := [...]chan struct{}{make(chan struct{}), make(chan struct{})}
	dead := [...]chan struct{}{make(chan struct{}), make(chan struct{})}
	var n atomic.Int64
	hooks.DeadLookTest(q, 0, time.Millisecond, page, func(look int) {
		n.Store(int64(look))
		for i, at := range [...]int{2, aLook} {
			if look == at {
				close(stopped[i])
				select {
				case <-dead[i]:
				case <-wctx.Done():
				}
			}
		}
		if look > aLook+looks {
			cancel()
		}
	})
	done := waitInBackground(wctx, q, a.ID, b.ID)
	var r *azservicebus.Receiver
	if !q.As(&r) {
		t.Fatal("no receiver")
	}
	for i, deadID := range [...]string{b.ID, a.ID} {
		select {
		case <-stopped[i]:
		case w := <-done:
			t.Fatalf("wait ended before %s was dead-lettered: %v, %v", deadID, w.res, w.err)
		}
		abandonUntilDead(ctx, t, r, deadID)
		close(dead[i])
	}
	w := <-done
	if w.err != nil {
		t.Fatalf("wait for A, dead-lettered after B (so before B's letter): not found within %d looks (%v)", looks, w.err)
	}
	for _, res := range w.res {
		if res.State != driver.ResultDeadLettered || !strings.Contains(res.Error, "MaxDeliveryCountExceeded") {
			t.Fatalf("wait reported %s %s, error %q; want dead-lettered by the broker", res.ID, res.State, res.Error)
		}
	}
	t.Logf("A found at look %d, %d after it was dead-lettered", n.Load(), n.Load()-aLook+1)
}

// abandonUntilDead abandons the message of task id until the broker
// dead-letters it. Others received meanwhile (Service Bus hands out the
// lowest sequence number first) stay locked until then, and are then
// abandoned: one more delivery each.
func abandonUntilDead(ctx context.Context, t *testing.T, r *azservicebus.Receiver, id string) {
	t.Helper()
	var held []*azservicebus.ReceivedMessage
	for delivery := 0; delivery < maxDeliveryCount; { // the last one dead-letters it
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v, %v", msgs, err)
		}
		if msgs[0].MessageID != id {
			held = append(held, msgs[0])
			continue
		}
		delivery = int(msgs[0].DeliveryCount)
		if err := r.AbandonMessage(ctx, msgs[0], nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range held {
		if err := r.AbandonMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// waited is what a Wait run in the background returned.
type waited struct {
	res []*jobq.Result
	err error
}

// waitInBackground runs q.Wait for ids under ctx and sends what it returned.
func waitInBackground(ctx context.Context, q *jobq.Queue, ids ...string) <-chan waited {
	done := make(chan waited, 1)
	go func() {
		res, err := q.Wait(ctx, ids...)
		done <- waited{res, err}
	}()
	return done
}
