package servicebus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	emu "github.com/jobq/jobq/emulators/servicebus"
)

// setup starts an emulator and returns a client, a sender and a peek-lock
// receiver on queue q.
func setup(t *testing.T, opts emu.Options) (*emu.Emulator, *azservicebus.Sender, *azservicebus.Receiver) {
	t.Helper()
	e := emu.Start(t, opts)
	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	sender, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	recv, err := client.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, sender, recv
}

func receiveOne(t *testing.T, r *azservicebus.Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(msgs) != 1 {
		t.Fatalf("received %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

func TestEmulatorWithSDK(t *testing.T) {
	t.Parallel()
	e, sender, recv := setup(t, emu.Options{LockDuration: 2 * time.Second, MaxDeliveryCount: 2})
	ctx := context.Background()

	id := "task-1"
	if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte("hello")}, nil); err != nil {
		t.Fatalf("send: %v", err)
	}
	// duplicate detection drops the second copy
	if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte("hello again")}, nil); err != nil {
		t.Fatalf("send duplicate: %v", err)
	}

	peeked, err := recv.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: new(int64)})
	if err != nil || len(peeked) != 1 || string(peeked[0].Body) != "hello" {
		t.Fatalf("peek = %d messages, %v; want the one message", len(peeked), err)
	}

	m := receiveOne(t, recv)
	if string(m.Body) != "hello" || m.MessageID != id || m.DeliveryCount != 1 || m.SequenceNumber == nil || m.LockedUntil == nil || m.EnqueuedTime == nil {
		t.Fatalf("received %+v", m)
	}
	before := *m.LockedUntil
	time.Sleep(10 * time.Millisecond)
	if err := recv.RenewMessageLock(ctx, m, nil); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if !m.LockedUntil.After(before) {
		t.Fatalf("renew did not extend the lock: %v -> %v", before, *m.LockedUntil)
	}
	if err := recv.AbandonMessage(ctx, m, nil); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	m = receiveOne(t, recv)
	if m.DeliveryCount != 2 {
		t.Fatalf("delivery count after abandon = %d, want 2", m.DeliveryCount)
	}
	if err := recv.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	var sbErr *azservicebus.Error

	// scheduled messages stay invisible until their time
	seqs, err := sender.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("later")}}, time.Now().Add(time.Second), nil)
	if err != nil || len(seqs) != 1 {
		t.Fatalf("schedule: %v %v", seqs, err)
	}
	m = receiveOne(t, recv)
	if string(m.Body) != "later" {
		t.Fatalf("got %q", m.Body)
	}

	// an expired lock is lost and the message comes back
	time.Sleep(2500 * time.Millisecond)
	if err := recv.CompleteMessage(ctx, m, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Fatalf("complete after expiry = %v, want lock lost", err)
	}
	m = receiveOne(t, recv)
	reason, desc := "boom", "it failed"
	if err := recv.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc}); err != nil {
		t.Fatalf("dead-letter: %v", err)
	}

	adm, err := admin.NewClientFromConnectionString(e.ConnectionString(), &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: e.AdminTransport()}})
	if err != nil {
		t.Fatal(err)
	}
	props, err := adm.GetQueueRuntimeProperties(ctx, "q", nil)
	if err != nil {
		t.Fatalf("runtime properties: %v", err)
	}
	if props.ActiveMessageCount != 0 || props.DeadLetterMessageCount != 1 {
		t.Fatalf("counts: active %d dead %d, want 0 and 1", props.ActiveMessageCount, props.DeadLetterMessageCount)
	}

	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	dlq, err := client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	d := receiveOne(t, dlq)
	if d.DeadLetterReason == nil || *d.DeadLetterReason != reason || d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription != desc {
		t.Fatalf("dead letter = %+v", d)
	}
	if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatalf("complete dead letter: %v", err)
	}
}
