package azqueue_test

import (
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestRequeuedDeadLetterHasNoRecord: a dead letter moved back to the queue
// has not ended, so its dead-lettered record goes (driver.Driver's
// RequeueDead). It used to stay: result and wait reported the task
// dead-lettered while it was queued to run again.
func TestRequeuedDeadLetterHasNoRecord(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	ctx := t.Context()
	pushed, err := q.Push(ctx, &jobq.Task{Command: "false"})
	if err != nil {
		t.Fatal(err)
	}
	receive := func() *jobq.Envelope {
		t.Helper()
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if err := receive().DeadLetter(ctx, "bad", ""); err != nil {
		t.Fatal(err)
	}
	if r, err := q.Result(ctx, pushed.ID); err != nil || r.State != driver.ResultDeadLettered {
		t.Fatalf("result after the dead-lettering: %+v, %v; want dead-lettered", r, err)
	}
	if n, err := q.Admin().RequeueDeadLetters(ctx, pushed.ID); err != nil || n != 1 {
		t.Fatalf("requeue = %d, %v; want 1", n, err)
	}
	if r, err := q.Result(ctx, pushed.ID); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("result of the requeued task: %+v, %v; want NotFound (it has not ended)", r, err)
	}
	if err := receive().Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := q.Result(ctx, pushed.ID); err != nil || r.State != driver.ResultSucceeded {
		t.Fatalf("result of the new run: %+v, %v; want succeeded", r, err)
	}
}
