package servicebus_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
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
			type waited struct {
				res []*jobq.Result
				err error
			}
			done := make(chan waited, 1)
			go func() {
				res, err := q.Wait(ctx, pushed.ID)
				done <- waited{res, err}
			}()
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
