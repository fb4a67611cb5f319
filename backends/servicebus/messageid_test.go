package servicebus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
)

// TestMessageIDLimitCountsCharacters: Service Bus limits a MessageId to 128
// characters (UTF-16 units), not bytes. A task ID of 100 "é" (200 bytes) is
// within it; 129 "é", or 65 characters outside the BMP (130 units), are not.
func TestMessageIDLimitCountsCharacters(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	for _, id := range []string{strings.Repeat("é", 128), strings.Repeat("𝄞", 64)} {
		res, err := q.Push(ctx, &jobq.Task{ID: id, Command: "true"})
		if err != nil {
			t.Fatalf("push with a %d-byte task ID of 128 characters: %v", len(id), err)
		}
		e := receive(t, q)
		if e.Task.ID != id || res.ID != id {
			t.Fatalf("received task ID %q (pushed %q), want %q", e.Task.ID, res.ID, id)
		}
		if err := e.Complete(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{strings.Repeat("é", 129), strings.Repeat("𝄞", 65)} {
		_, err := q.Push(ctx, &jobq.Task{ID: id, Command: "true"})
		if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), "128-character MessageId limit") {
			t.Fatalf("push with a task ID of 129 or 130 UTF-16 units = %v, want InvalidArgument naming the 128-character limit", err)
		}
	}
}

// TestHeldTaskIDWithinMessageIDLimit: a task held for its dependencies is
// pushed later, with its task ID as MessageId; one whose ID Service Bus
// would refuse is refused when it is pushed, not left held for ever.
func TestHeldTaskIDWithinMessageIDLimit(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t, resultsParam(t)))
	ctx := ctxT(t)
	_, err := q.Push(ctx, &jobq.Task{ID: strings.Repeat("x", 129), Command: "true", After: []string{"first"}})
	if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), "128-character MessageId limit") {
		t.Fatalf("push of a held task with a 129-character ID = %v, want InvalidArgument naming the 128-character limit", err)
	}
}
