package servicebus_test

import (
	"testing"

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
	q, _ := open(t, newQueueURL(t, resultsParam(t)))
	ctx := ctxT(t)
	pushed, err := q.Push(ctx, &jobq.Task{Command: "false"})
	if err != nil {
		t.Fatal(err)
	}
	if err := receive(t, q).DeadLetter(ctx, "bad", ""); err != nil {
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
	if err := receive(t, q).Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := q.Result(ctx, pushed.ID); err != nil || r.State != driver.ResultSucceeded {
		t.Fatalf("result of the new run: %+v, %v; want succeeded", r, err)
	}
}
