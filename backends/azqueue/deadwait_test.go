package azqueue_test

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// TestWaitEndsForATaskDeadLetteredWithoutRecord: an ai4s-jobq worker moves
// a failed task to QUEUE-failed and writes no result record. Wait used to
// wait for it for ever; it now finds it by peeking the dead letters (never
// dequeuing them, which would hide them from a dlq scan and count a
// delivery) and reports it dead-lettered.
func TestWaitEndsForATaskDeadLetteredWithoutRecord(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	ctx := t.Context()
	pushed, err := q.Push(ctx, &jobq.Task{Command: "false"})
	if err != nil {
		t.Fatal(err)
	}
	// What ai4s-jobq does with a task that failed for the last time.
	main, dead := mainClient(t, q), deadClient(t, q)
	got, err := main.DequeueMessage(ctx, nil)
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("dequeue: %v, %v", got, err)
	}
	m := got.Messages[0]
	if _, err := dead.EnqueueMessage(ctx, *m.MessageText, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := main.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err != nil {
		t.Fatal(err)
	}
	res, err := q.Wait(ctx, pushed.ID)
	if err != nil {
		t.Fatalf("wait for a task dead-lettered without a record: %v", err)
	}
	if res[0].State != driver.ResultDeadLettered || !strings.Contains(res[0].Error, "no reason recorded") {
		t.Fatalf("wait reported %s, error %q; want dead-lettered, saying no reason was recorded", res[0].State, res[0].Error)
	}
	peeked, err := dead.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: new(int32(32))})
	if err != nil || len(peeked.Messages) != 1 {
		t.Fatalf("peek the dead letters: %v, %v; want the one", peeked, err)
	}
	if n := *peeked.Messages[0].DequeueCount; n != 0 {
		t.Fatalf("the dead letter was dequeued %d times by the wait; want 0 (peeked only)", n)
	}
}
