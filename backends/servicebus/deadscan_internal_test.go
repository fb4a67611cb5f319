package servicebus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/errcode"
)

// TestDeadScanOutlastingLocksEnds requeues, by message ID, the last of
// many dead letters with a scan slower than the locks (one message per
// receive, locks of 5 s). Service Bus hands out the earliest available
// messages first, so once the first ones passed over came back the scan
// went over them again and again and never reached the one asked for:
// 'jobq QUEUE requeue' hung. It now stops and says why.
func TestDeadScanOutlastingLocksEnds(t *testing.T) {
	client, _ := startEmulator(t)
	const queue = "hg-dead-scan"
	d := openDriver(t, client, queue)
	d.deadBatch = 1
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const others = 12000
	r, err := client.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	for sent := 0; sent <= others; {
		b, err := d.sender.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for ; sent <= others && b.NumMessages() < 500; sent++ {
			id := fmt.Sprintf("other-%d", sent)
			if sent == others {
				id = "target"
			}
			if err := b.AddMessage(&azservicebus.Message{MessageID: &id, Body: []byte("{}")}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.sender.SendMessageBatch(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	for dead := 0; dead <= others; {
		msgs, err := r.ReceiveMessages(ctx, 256, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := r.DeadLetterMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			dead++
		}
	}
	start := time.Now()
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	n, err := d.RequeueDead(sctx, []string{"target"})
	t.Logf("requeue: %d, %v after %v", n, err, time.Since(start))
	if n == 1 && err == nil {
		t.Skip("the scan reached the target within a lock duration: nothing to check")
	}
	if errcode.Of(err) != errcode.FailedPrecondition || sctx.Err() != nil {
		t.Fatalf("requeue of a dead letter the scan cannot reach: %d, %v; want a FailedPrecondition error before the deadline", n, err)
	}
}
