package servicebus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// TestEmulatorDeadLetterKeepsSequenceNumber: Azure keeps a message's
// sequence number and enqueued time when it dead-letters it, by a
// receiver's disposition or past the max delivery count, so letters can
// land among older ones. The emulator gave each a new number and time at
// the end of the dead letters; it now keeps them, and the dead letters
// still peek (from any number) and receive in sequence order, numbered as
// one with the queue.
func TestEmulatorDeadLetterKeepsSequenceNumber(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, adm := startEmulator(t)
	const queue = "hd-dead-seq"
	if _, err := adm.CreateQueue(ctx, queue, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{MaxDeliveryCount: to.Ptr(int32(1))}}); err != nil {
		t.Fatal(err)
	}
	sender, err := client.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(ctx)
	for i := range 3 {
		if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint(i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	recv, err := client.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close(ctx)
	var got []*azservicebus.ReceivedMessage
	for len(got) < 3 {
		msgs, err := recv.ReceiveMessages(ctx, 3-len(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs...)
	}
	seq := map[string]int64{}
	enqueued := map[string]time.Time{}
	for _, m := range got {
		seq[string(m.Body)], enqueued[string(m.Body)] = *m.SequenceNumber, *m.EnqueuedTime
	}
	// The last first, by the receiver; the first past the max delivery
	// count; the middle one completed.
	for _, m := range got {
		var err error
		switch string(m.Body) {
		case "2":
			err = recv.DeadLetterMessage(ctx, m, nil)
		case "1":
			err = recv.CompleteMessage(ctx, m, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range got {
		if string(m.Body) == "0" {
			if err := recv.AbandonMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	dead, err := client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close(ctx)
	var peeked []*azservicebus.ReceivedMessage
	for len(peeked) < 2 && ctx.Err() == nil { // the broker dead-letters "0" on its next tick
		peeked, err = dead.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(peeked) != 2 || string(peeked[0].Body) != "0" || string(peeked[1].Body) != "2" {
		t.Fatalf("dead letters peeked %v; want 0 then 2, in sequence order", bodies(peeked))
	}
	for _, m := range peeked {
		b := string(m.Body)
		if *m.SequenceNumber != seq[b] || !m.EnqueuedTime.Equal(enqueued[b]) {
			t.Errorf("dead letter %s: sequence number %d, enqueued %v; want %d, %v as in the queue",
				b, *m.SequenceNumber, *m.EnqueuedTime, seq[b], enqueued[b])
		}
	}
	if from, err := dead.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(seq["0"] + 1)}); err != nil || len(from) != 1 || string(from[0].Body) != "2" {
		t.Errorf("peek from after 0's number: %v, %v; want 2 alone", bodies(from), err)
	}
	first, err := dead.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(first) != 1 || string(first[0].Body) != "0" {
		t.Errorf("first dead letter received: %v, %v; want 0, the lowest number", bodies(first), err)
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("3")}, nil); err != nil {
		t.Fatal(err)
	}
	all, err := recv.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr(int64(0))})
	if err != nil || len(all) != 1 || *all[0].SequenceNumber <= seq["2"] {
		t.Errorf("a message sent after the letters: %v, %v; want a number above theirs (the queue and its dead letters number as one)", bodies(all), err)
	}
}

func bodies(ms []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%s@%d", m.Body, *m.SequenceNumber)
	}
	return out
}
