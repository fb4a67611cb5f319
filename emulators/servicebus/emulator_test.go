package servicebus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/go-amqp"

	emu "github.com/jobq/jobq/emulators/servicebus"
)

// setup starts an emulator and returns a client, a sender and a peek-lock
// receiver on queue q.
func setup(t *testing.T, opts emu.Options) (*emu.Emulator, *azservicebus.Sender, *azservicebus.Receiver) {
	t.Helper()
	e := emu.Start(t, opts)
	sender, recv := connect(t, e, nil)
	return e, sender, recv
}

// connect returns a sender and a receiver of queue q on a client of e with
// options copts, closed when the test ends.
func connect(t *testing.T, e *emu.Emulator, copts *azservicebus.ClientOptions) (*azservicebus.Sender, *azservicebus.Receiver) {
	t.Helper()
	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString(), copts)
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
	return sender, recv
}

// noRetries are client options without retries: a refused request is
// retried by the SDK (Azure's refusals of oversized properties even ask
// for it), which would hide the refusal.
var noRetries = &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}}

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
	e, sender, recv := setup(t, emu.Options{LockDuration: 5 * time.Second, MaxDeliveryCount: 2, DuplicateDetectionWindow: time.Minute})
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
	time.Sleep(5500 * time.Millisecond)
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

	dlq := deadLetterReceiver(t, e)
	d := receiveOne(t, dlq)
	if d.DeadLetterReason == nil || *d.DeadLetterReason != reason || d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription != desc {
		t.Fatalf("dead letter = %+v", d)
	}
	if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatalf("complete dead letter: %v", err)
	}
}

// deadLetterReceiver returns a peek-lock receiver on queue q's dead letters.
func deadLetterReceiver(t *testing.T, e *emu.Emulator) *azservicebus.Receiver {
	t.Helper()
	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	dlq, err := client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	return dlq
}

// adminClient returns an admin client on e's ATOM endpoint.
func adminClient(t *testing.T, e *emu.Emulator) *admin.Client {
	t.Helper()
	adm, err := admin.NewClientFromConnectionString(e.ConnectionString(), &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: e.AdminTransport()}})
	if err != nil {
		t.Fatal(err)
	}
	return adm
}

// TestEmulatorAzureLimits: the emulator refuses what Azure refuses and
// applies Azure's defaults.
func TestEmulatorAzureLimits(t *testing.T) {
	t.Parallel()
	e, sender, recv := setup(t, emu.Options{LockDuration: 5 * time.Second})
	ctx := context.Background()
	adm := adminClient(t, e)

	// queue settings: lock duration 5s to 5m; Azure's defaults otherwise
	for _, bad := range []string{"PT4S", "PT6M"} {
		lock := bad
		if _, err := adm.CreateQueue(ctx, "bad-lock-"+bad, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{LockDuration: &lock}}); err == nil {
			t.Errorf("created a queue with lock duration %s, which Azure refuses", bad)
		}
	}
	if _, err := emu.Launch(ctx, emu.Options{LockDuration: time.Second}); err == nil {
		t.Error("launched an emulator with a 1s lock duration")
	}
	created, err := adm.CreateQueue(ctx, "defaults", nil)
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	p := created.QueueProperties
	if p.MaxDeliveryCount == nil || *p.MaxDeliveryCount != 10 || p.RequiresDuplicateDetection == nil || *p.RequiresDuplicateDetection {
		t.Errorf("a queue created without settings has max delivery count %v and duplicate detection %v; want Azure's 10 and off",
			deref(p.MaxDeliveryCount), deref(p.RequiresDuplicateDetection))
	}

	// duplicate detection only where the queue was created with it
	id := "same"
	for range 2 {
		if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if peeked, err := recv.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: new(int64)}); err != nil || len(peeked) != 2 {
		t.Errorf("a queue without duplicate detection kept %d of two messages with one ID (%v), want 2", len(peeked), err)
	}
	for range 2 {
		m := receiveOne(t, recv)
		if err := recv.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}

	// the max delivery count (10 unless set) dead-letters a message
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("poison")}, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		m := receiveOne(t, recv)
		if m.DeliveryCount != uint32(i) {
			t.Fatalf("delivery %d has delivery count %d", i, m.DeliveryCount)
		}
		if err := recv.AbandonMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	dlq := deadLetterReceiver(t, e)
	if d := receiveOne(t, dlq); string(d.Body) != "poison" || deref(d.DeadLetterReason) != "MaxDeliveryCountExceeded" {
		t.Fatalf("after 10 abandons the dead letter is %q with reason %v, want poison and MaxDeliveryCountExceeded", d.Body, deref(d.DeadLetterReason))
	}

	// 256 KiB per message
	var tooLarge *amqp.Error
	big := &azservicebus.Message{Body: make([]byte, 256*1024)}
	// (the SDK refuses it itself, from the size the link announces)
	if err := sender.SendMessage(ctx, big, nil); !errors.Is(err, azservicebus.ErrMessageTooLarge) && !(errors.As(err, &tooLarge) && tooLarge.Condition == amqp.ErrCondMessageSizeExceeded) {
		t.Errorf("sending a 256 KiB body = %v, want message-size-exceeded", err)
	}
	if _, err := sender.ScheduleMessages(ctx, []*azservicebus.Message{big}, time.Now().Add(time.Hour), nil); err == nil {
		t.Error("scheduling a 256 KiB body succeeded")
	}

	// dead-letter reason and description: 4,096 characters each, and the
	// dead letter within 256 KiB. (Each refusal needs a fresh delivery: once
	// the broker refuses a settlement on the link, the SDK takes the message
	// as settled and ignores later settlements of it on the link.)
	long, fits := strings.Repeat("é", 4097), strings.Repeat("é", 4096)
	for _, o := range []*azservicebus.DeadLetterOptions{{Reason: &long}, {ErrorDescription: &long}, {Reason: &fits, ErrorDescription: &fits}} {
		if err := sender.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 250*1024)}, nil); err != nil {
			t.Fatalf("send 250 KiB: %v", err)
		}
		m := receiveOne(t, recv)
		if err := recv.DeadLetterMessage(ctx, m, o); err == nil {
			t.Fatalf("dead-lettered a 250 KiB message with reason %v characters and description %v characters: over 4,096 characters or 256 KiB in all",
				runes(o.Reason), runes(o.ErrorDescription))
		}
		short := "short"
		byToken := &azservicebus.ReceivedMessage{LockToken: m.LockToken}
		if err := recv.DeadLetterMessage(ctx, byToken, &azservicebus.DeadLetterOptions{Reason: &short, ErrorDescription: &short}); err != nil {
			t.Fatalf("a refused dead-lettering must leave the message locked for another settlement: %v", err)
		}
	}
}

// TestEmulatorRefusesWhatAzureRefuses: message IDs over 128 characters,
// duplicate detection histories outside 20s to 7 days, user metadata over
// 1,024 characters and queue names Azure does not allow.
func TestEmulatorRefusesWhatAzureRefuses(t *testing.T) {
	t.Parallel()
	e, sender, recv := setup(t, emu.Options{LockDuration: 5 * time.Second})
	ctx := context.Background()
	adm := adminClient(t, e)

	long, fits := strings.Repeat("i", 129), strings.Repeat("i", 128)
	if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &long, Body: []byte("x")}, nil); err == nil {
		t.Error("sent a message whose ID is 129 characters long; Azure allows 128")
	}
	// (a refused management request is retried: schedule without retries)
	once, _ := connect(t, e, noRetries)
	if _, err := once.ScheduleMessages(ctx, []*azservicebus.Message{{MessageID: &long, Body: []byte("x")}}, time.Now().Add(time.Hour), nil); err == nil {
		t.Error("scheduled a message whose ID is 129 characters long; Azure allows 128")
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &fits, Body: []byte("x")}, nil); err != nil {
		t.Errorf("sending a message whose ID is 128 characters long: %v", err)
	}
	if m := receiveOne(t, recv); m.MessageID != fits {
		t.Errorf("received message ID %q, want the 128-character one (and nothing of the refused ones)", m.MessageID)
	}

	yes := true
	for _, bad := range []string{"PT19S", "P8D"} {
		window := bad
		if _, err := adm.CreateQueue(ctx, "bad-window", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
			RequiresDuplicateDetection: &yes, DuplicateDetectionHistoryTimeWindow: &window}}); err == nil {
			t.Errorf("created a queue with a duplicate detection history of %s; Azure allows 20s to 7 days", bad)
		}
	}
	if _, err := emu.Launch(ctx, emu.Options{DuplicateDetectionWindow: time.Second}); err == nil {
		t.Error("launched an emulator with a 1s duplicate detection history")
	}

	for _, name := range []string{"trail/", "at@sign", "star*", strings.Repeat("n", 261)} {
		if _, err := adm.CreateQueue(ctx, name, nil); err == nil {
			t.Errorf("created a queue named %q, which Azure refuses", name)
		}
	}

	meta := strings.Repeat("m", 1025)
	if _, err := adm.CreateQueue(ctx, "big-metadata", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{UserMetadata: &meta}}); err == nil {
		t.Error("created a queue with 1,025 characters of user metadata; Azure allows 1,024")
	}
	got, err := adm.GetQueue(ctx, "q", nil)
	if err != nil || got == nil {
		t.Fatalf("get queue: %v", err)
	}
	got.UserMetadata = &meta
	if _, err := adm.UpdateQueue(ctx, "q", got.QueueProperties, nil); err == nil {
		t.Error("set 1,025 characters of user metadata; Azure allows 1,024")
	}
	meta = meta[:1024]
	got.UserMetadata = &meta
	if _, err := adm.UpdateQueue(ctx, "q", got.QueueProperties, nil); err != nil {
		t.Errorf("setting 1,024 characters of user metadata: %v", err)
	}
}

func runes(s *string) int {
	if s == nil {
		return 0
	}
	return len([]rune(*s))
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestEmulatorFaults: the fault switches do what they say.
func TestEmulatorFaults(t *testing.T) {
	t.Parallel()
	e, sender, recv := setup(t, emu.Options{LockDuration: 5 * time.Second})
	ctx := context.Background()
	for _, b := range []string{"a", "b", "c", "d"} {
		if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte(b)}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// a dropped acknowledgement: the completion waits in vain, yet applies
	if err := e.SetFaults(ctx, "q", emu.Faults{DropAcks: 1}); err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, recv)
	short, cancel := context.WithTimeout(ctx, time.Second)
	err := recv.CompleteMessage(short, m, nil)
	cancel()
	if err == nil {
		t.Fatal("a completion whose acknowledgement was dropped returned success")
	}
	if err := recv.CompleteMessage(ctx, &azservicebus.ReceivedMessage{LockToken: m.LockToken}, nil); !isLockLost(err) {
		t.Fatalf("completing again after a dropped acknowledgement = %v, want lock lost (the first one applied)", err)
	}

	// a late acknowledgement: applied at once, acknowledged later
	if err := e.SetFaults(ctx, "q", emu.Faults{AckDelay: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	m = receiveOne(t, recv)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- recv.CompleteMessage(ctx, m, nil) }()
	time.Sleep(500 * time.Millisecond)
	if peeked, err := recv.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: m.SequenceNumber}); err != nil || (len(peeked) > 0 && *peeked[0].SequenceNumber == *m.SequenceNumber) {
		t.Fatalf("a completion with a late acknowledgement had not applied at once: peek %d, %v", len(peeked), err)
	}
	if err := <-done; err != nil || time.Since(start) < 2*time.Second {
		t.Fatalf("a late acknowledgement came after %v with %v, want success after about 3s", time.Since(start), err)
	}

	// a link detached mid-receive: the message it delivered stays locked
	// and can be completed by lock token
	if err := e.SetFaults(ctx, "q", emu.Faults{DetachAfter: 1}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	msgs, err := recv.ReceiveMessages(rctx, 1, nil)
	rcancel()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive on a link detached mid-receive: %d messages, %v; want the one it delivered", len(msgs), err)
	}
	// The SDK sends the completion on the detached link, where the broker
	// applies it without an acknowledgement reaching the client; the SDK's
	// retry on the management link then finds the lock gone.
	if err := recv.CompleteMessage(ctx, msgs[0], nil); err != nil && !isLockLost(err) {
		t.Fatalf("complete a message whose link was detached: %v", err)
	}
	// The first receive after a detach may come back empty while the SDK
	// attaches a new link.
	for i := 0; i < 5; i++ {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		msgs, err := recv.ReceiveMessages(rctx, 1, nil)
		rcancel()
		if err != nil {
			t.Fatalf("receive after a detach: %v", err)
		}
		if len(msgs) > 0 {
			m = msgs[0]
			break
		}
	}
	if string(m.Body) != "d" {
		t.Fatalf("received %q after the detach, want d", m.Body)
	}
	if err := recv.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("complete after a detach: %v", err)
	}
}

func isLockLost(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost
}

// TestEmulatorClockOffset: the broker stamps its own clock.
func TestEmulatorClockOffset(t *testing.T) {
	t.Parallel()
	const offset = -time.Hour
	_, sender, recv := setup(t, emu.Options{LockDuration: 30 * time.Second, ClockOffset: offset})
	ctx := context.Background()
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, recv)
	if got := time.Until(*m.LockedUntil); got < offset || got > offset+31*time.Second {
		t.Fatalf("locked until %v from now, want the broker's clock: about %v", got, offset+30*time.Second)
	}
	if err := recv.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
}

// TestEmulatorCancelOnlyScheduled: Azure refuses to cancel a sequence
// number that is not a scheduled message (MessageNotFound: "Messages not
// found. Missing sequence numbers: N"), and the emulator cancels nothing of
// such a request.
func TestEmulatorCancelOnlyScheduled(t *testing.T) {
	t.Parallel()
	e := emu.Start(t, emu.Options{LockDuration: 5 * time.Second})
	ctx := context.Background()
	// (a refused management request is retried: cancel without retries)
	sender, recv := connect(t, e, noRetries)
	schedule := func(at time.Time) int64 {
		t.Helper()
		seqs, err := sender.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("x")}}, at, nil)
		if err != nil || len(seqs) != 1 {
			t.Fatalf("schedule: %v %v", seqs, err)
		}
		return seqs[0]
	}
	canceled := schedule(time.Now().Add(time.Hour))
	if err := sender.CancelScheduledMessages(ctx, []int64{canceled}, nil); err != nil {
		t.Fatalf("cancel a scheduled message: %v", err)
	}
	for _, tc := range []struct {
		name string
		seq  int64
	}{
		{"never sent", 1 << 40},
		{"already canceled", canceled},
		{"already due", schedule(time.Now().Add(-time.Minute))},
	} {
		future := schedule(time.Now().Add(time.Hour))
		err := sender.CancelScheduledMessages(ctx, []int64{future, tc.seq}, nil)
		var sbErr *azservicebus.Error
		if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound || !strings.Contains(err.Error(), "Missing sequence numbers") {
			t.Errorf("%s: cancel = %v, want not found (Missing sequence numbers)", tc.name, err)
		}
		peeked, err := recv.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &future})
		if err != nil || len(peeked) != 1 || *peeked[0].SequenceNumber != future {
			t.Errorf("%s: the scheduled message beside the missing one is gone (%v); a refused cancel cancels nothing", tc.name, err)
		}
	}
}

// TestEmulatorHeaderLimits: Azure refuses a message with a property over
// 32 KB or properties over 64 KB in all, on a send, a schedule and a
// dead-lettering (which adds the reason and description to them).
func TestEmulatorHeaderLimits(t *testing.T) {
	t.Parallel()
	// A lock long enough to outlast the SDK's retries of the refusal on a
	// loaded machine (with 5 s, a CI run saw the lock lost instead).
	e := emu.Start(t, emu.Options{LockDuration: time.Minute})
	ctx := context.Background()
	// (Azure's refusal asks to retry, so the SDK would: send without retries)
	sender, recv := connect(t, e, noRetries)
	kb := func(n int) string { return strings.Repeat("p", n*1024) }
	for _, tc := range []struct {
		name  string
		props map[string]any
		ok    bool
	}{
		{"one property of 31 KB", map[string]any{"a": kb(31)}, true},
		{"two of 31 KB", map[string]any{"a": kb(31), "b": kb(31)}, true},
		{"one of 33 KB", map[string]any{"a": kb(33)}, false},
		{"three of 30 KB", map[string]any{"a": kb(30), "b": kb(30), "c": kb(30)}, false},
	} {
		err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte(tc.name), ApplicationProperties: tc.props}, nil)
		if (err == nil) != tc.ok {
			t.Errorf("send with %s: %v, want accepted %v", tc.name, err, tc.ok)
		}
		_, err = sender.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte(tc.name), ApplicationProperties: tc.props}}, time.Now().Add(time.Hour), nil)
		if (err == nil) != tc.ok {
			t.Errorf("schedule with %s: %v, want accepted %v", tc.name, err, tc.ok)
		}
	}
	// The first accepted message (31 KB of properties) takes a dead-letter
	// description of 12 KB; the second (62 KB) does not. (The SDK retries
	// the refusal, as Azure's error asks, and its retry on the link is a
	// no-op that reports success: what shows the refusal is that the
	// message stays locked, to be settled again by its lock token.)
	desc, short := strings.Repeat("€", 4096), "short"
	for i, refused := range []bool{false, true} {
		m := receiveOne(t, recv)
		_ = recv.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{ErrorDescription: &desc})
		byToken := &azservicebus.ReceivedMessage{LockToken: m.LockToken}
		err := recv.DeadLetterMessage(ctx, byToken, &azservicebus.DeadLetterOptions{ErrorDescription: &short})
		if (err == nil) != refused {
			t.Errorf("message %d (%q) after dead-lettering with a 12 KB description: settling again by lock token = %v, want the first refused: %v",
				i, m.Body, err, refused)
		}
	}
}

// TestEmulatorMessageExpiry: a queue created with a default message
// time-to-live reports it, and drops a message older than it, or
// dead-letters it (TTLExpiredException) with dead-lettering on expiration.
func TestEmulatorMessageExpiry(t *testing.T) {
	t.Parallel()
	e, _, _ := setup(t, emu.Options{LockDuration: 5 * time.Second})
	ctx := context.Background()
	adm := adminClient(t, e)
	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	ttl := "PT1S"
	for _, tc := range []struct {
		queue string
		dead  bool
	}{{"hd-expire-drop", false}, {"hd-expire-dead", true}} {
		created, err := adm.CreateQueue(ctx, tc.queue, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
			DefaultMessageTimeToLive: &ttl, DeadLetteringOnMessageExpiration: &tc.dead}})
		if err != nil {
			t.Fatalf("%s: create: %v", tc.queue, err)
		}
		if got := deref(created.DefaultMessageTimeToLive); got != "PT1S" {
			t.Errorf("%s: the queue reports a default message TTL of %v, want PT1S", tc.queue, got)
		}
		sender, err := client.NewSender(tc.queue, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("old")}, nil); err != nil {
			t.Fatal(err)
		}
		opts := &azservicebus.ReceiverOptions{}
		if tc.dead {
			opts.SubQueue = azservicebus.SubQueueDeadLetter
		}
		recv, err := client.NewReceiverForQueue(tc.queue, opts)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			peeked, err := recv.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: new(int64)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.dead && len(peeked) == 1 {
				if r := deref(peeked[0].DeadLetterReason); r != "TTLExpiredException" {
					t.Errorf("%s: dead letter reason %v, want TTLExpiredException", tc.queue, r)
				}
				break
			}
			if !tc.dead && len(peeked) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the message has not expired after 30s with a TTL of 1s", tc.queue)
			}
		}
	}
}
