package servicebus_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/servicebus"
	"github.com/jobq/jobq/driver"
	emu "github.com/jobq/jobq/emulators/servicebus"
	"github.com/jobq/jobq/errcode"
)

// faultyQueue opens a fresh queue on this package's emulator and returns it
// with a function that sets its fault switches.
func faultyQueue(t *testing.T, extra ...string) (*jobq.Queue, *logBuffer, func(emu.Faults)) {
	t.Helper()
	if env.emu == nil {
		t.Skip("needs the emulator's fault switches")
	}
	raw := newQueueURL(t, extra...)
	q, logs := open(t, raw)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Trim(u.Path, "/")
	return q, logs, func(f emu.Faults) {
		t.Helper()
		if err := env.emu.SetFaults(ctxT(t), name, f); err != nil {
			t.Fatal(err)
		}
	}
}

// drain receives and completes every task until the queue stays empty for
// quiet, and counts the tasks by command.
func drain(t *testing.T, q *jobq.Queue, quiet time.Duration) map[string]int {
	t.Helper()
	got := map[string]int{}
	for {
		e, err := q.Receive(ctxT(t), jobq.ReceiveOptions{Wait: quiet})
		if errors.Is(err, jobq.ErrEmpty) {
			return got
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		got[e.Task.Command]++
		if err := e.Complete(ctxT(t)); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
}

// TestRequeueLostCompleteAck: with requeue=schedule a requeue schedules a
// copy and completes the original. When the broker applies that completion
// but its acknowledgement is lost or late, the completion reports a lost
// lock; the copy must stay, or the task is gone. (Before the fix the copy
// was canceled and the task lost.)
func TestRequeueLostCompleteAck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		faults emu.Faults
	}{
		{"lost", emu.Faults{DropAcks: 1}},
		{"late", emu.Faults{AckDelay: 3 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, logs, faults := faultyQueue(t, "requeue=schedule")
			ctx := ctxT(t)
			if _, err := q.Push(ctx, &jobq.Task{Command: "keep me"}); err != nil {
				t.Fatal(err)
			}
			e := receive(t, q)
			faults(tc.faults)
			if err := e.Requeue(ctx, time.Second); err != nil {
				t.Fatalf("requeue whose completion acknowledgement was %s: %v", tc.name, err)
			}
			faults(emu.Faults{})
			if got := drain(t, q, 5*time.Second); got["keep me"] != 1 {
				t.Fatalf("after a requeue whose completion acknowledgement was %s the queue held %v, want the task once\n%s", tc.name, got, logs)
			}
		})
	}
}

// TestRequeueAfterLockExpiredCancelsCopy: a requeue on a lock that has
// expired leaves the original for its next holder and no copy behind.
func TestRequeueAfterLockExpiredCancelsCopy(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	if _, err := q.Push(ctx, &jobq.Task{Command: "once"}); err != nil {
		t.Fatal(err)
	}
	e := receive(t, q)
	time.Sleep(time.Until(e.Expiry()) + 100*time.Millisecond)
	if err := e.Requeue(ctx, 0); !errors.Is(err, errcode.LockLost) {
		t.Fatalf("requeue after the lock expired = %v, want LockLost", err)
	}
	if got := drain(t, q, 3*time.Second); got["once"] != 1 {
		t.Fatalf("after a requeue on an expired lock the queue held %v, want the task once", got)
	}
}

// TestRequeueCostsNothing: a requeue (a gate miss, a busy key, a rate
// limit, a stopping worker) uses up neither a retry nor one of the queue's
// max delivery count. Before the fix each requeue was an abandon: the
// retry budget shrank, and Service Bus dead-lettered the task at the max
// delivery count without it ever running.
func TestRequeueCostsNothing(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t, "max_delivery_count=2"))
	ctx := ctxT(t)
	// Retried at once: the queue's backoff, since a task of its own would be v2.
	if err := q.Admin().SetPolicy(ctx, driver.RetryBackoff(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, &jobq.Task{Command: "gated", NumRetries: 1}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: 10 * time.Second})
		if err != nil {
			t.Fatalf("receive %d after %d requeues: %v (Service Bus dead-lettered it?)", i, i-1, err)
		}
		if e.DeliveryCount != i || e.RetriesLeft() != 1 {
			t.Fatalf("delivery %d after %d requeues: delivery count %d, retries left %d; want %d and 1", i, i-1, e.DeliveryCount, e.RetriesLeft(), i)
		}
		if err := e.Requeue(ctx, 0); err != nil {
			t.Fatalf("requeue: %v", err)
		}
	}
	// The retries are still all there, and a failure still uses one up.
	e := receive(t, q)
	if fr, err := e.Fail(ctx, errors.New("boom"), ""); err != nil || !fr.Retried || fr.RetriesLeft != 0 {
		t.Fatalf("first failure: %+v, %v; want a retry with none left", fr, err)
	}
	e = receive(t, q)
	if fr, err := e.Fail(ctx, errors.New("boom again"), "tail"); err != nil || fr.Retried {
		t.Fatalf("second failure: %+v, %v; want dead-lettered", fr, err)
	}
	expectDeadLetter(t, q, "boom again", 6)
}

// expectDeadLetter checks that the queue holds one dead letter, dead-lettered
// by jobq with reason (not by Service Bus at its max delivery count).
func expectDeadLetter(t *testing.T, q *jobq.Queue, reason string, deliveries int) {
	t.Helper()
	dead, err := q.Admin().DeadLetters(ctxT(t), 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters: %d, %v; want 1", len(dead), err)
	}
	if dead[0].Reason != reason || dead[0].DeliveryCount != deliveries {
		t.Fatalf("dead letter with reason %q after %d deliveries, want %q after %d", dead[0].Reason, dead[0].DeliveryCount, reason, deliveries)
	}
}

// TestRetriesBeyondMaxDeliveryCount: a task with more retries than the
// queue's max delivery count spends them all and is dead-lettered by jobq
// with its reason, not by Service Bus (MaxDeliveryCountExceeded) half-way.
func TestRetriesBeyondMaxDeliveryCount(t *testing.T) {
	t.Parallel()
	q, logs := open(t, newQueueURL(t, "max_delivery_count=2"))
	ctx := ctxT(t)
	// Retried at once: the queue's backoff, since a task of its own would be v2.
	if err := q.Admin().SetPolicy(ctx, driver.RetryBackoff(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, &jobq.Task{Command: "flaky", NumRetries: 3}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: 10 * time.Second})
		if err != nil {
			t.Fatalf("receive %d: %v (Service Bus dead-lettered it?)", i, err)
		}
		fr, err := e.Fail(ctx, fmt.Errorf("failure %d", i), "")
		if err != nil || fr.Retried != (i < 4) {
			t.Fatalf("failure %d: %+v, %v", i, fr, err)
		}
	}
	expectDeadLetter(t, q, "failure 4", 4)
	if !strings.Contains(logs.String(), "max delivery count is low") {
		t.Errorf("opening a queue whose max delivery count is 2 did not warn:\n%s", logs)
	}
	if n := strings.Count(logs.String(), "requeues it as a copy instead"); n != 1 {
		t.Errorf("the carry-over to a copy was logged %d times, want once:\n%s", n, logs)
	}
}

// TestDeadLetterWithinAzureLimits: a dead letter's reason and description
// are cut to Azure's 4,096 characters, and to what keeps the dead-lettered
// message within 256 KiB. Before the fix the description kept 8 KiB and
// the dead-lettering was refused.
func TestDeadLetterWithinAzureLimits(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	big := strings.Repeat("x", servicebus.MaxMessageBytes-2048)
	for _, cmd := range []string{"small", big} {
		if _, err := q.Push(ctx, &jobq.Task{Command: cmd}); err != nil {
			t.Fatalf("push %d bytes: %v", len(cmd), err)
		}
		e := receive(t, q)
		reason := strings.Repeat("why ", 3000)
		detail := strings.Repeat("é", 20000) + "THE END"
		if err := e.DeadLetter(ctx, reason, detail); err != nil {
			t.Fatalf("dead-letter a %d-byte task with long texts: %v", len(cmd), err)
		}
	}
	dead, err := q.Admin().DeadLetters(ctx, 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters: %d, %v", len(dead), err)
	}
	for _, d := range dead {
		if len([]rune(d.Reason)) > servicebus.MaxDeadLetterTextLen || len([]rune(d.Detail)) > servicebus.MaxDeadLetterTextLen ||
			!strings.HasPrefix(d.Reason, "why why") || !strings.HasSuffix(d.Detail, "THE END") {
			t.Errorf("dead letter reason %d characters (%.10q...), detail %d characters (...%q)",
				len([]rune(d.Reason)), d.Reason, len([]rune(d.Detail)), d.Detail[max(0, len(d.Detail)-10):])
		}
	}
}

// TestLinkDetachedMidReceive: the broker detaches the receiver link right
// after delivering a message. Completions and requeues of what it
// delivered still settle it (or it comes back when its lock expires):
// every task is completed, none is lost.
func TestLinkDetachedMidReceive(t *testing.T) {
	t.Parallel()
	q, _, faults := faultyQueue(t)
	ctx := ctxT(t)
	if _, err := q.PushBatch(ctx, []*jobq.Task{{Command: "a"}, {Command: "b"}, {Command: "c"}}, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	faults(emu.Faults{DetachAfter: 1})
	e := receive(t, q)
	if err := e.Requeue(ctx, 0); err != nil {
		t.Fatalf("requeue a message whose link was detached: %v", err)
	}
	faults(emu.Faults{DetachAfter: 1})
	e = receive(t, q)
	if err := e.Complete(ctx); err != nil && !errors.Is(err, errcode.LockLost) {
		t.Fatalf("complete a message whose link was detached: %v", err)
	}
	completed := e.Task.Command
	got := drain(t, q, 2*lockDuration)
	got[completed]++
	for _, c := range []string{"a", "b", "c"} {
		if got[c] == 0 {
			t.Fatalf("task %s was lost after a link detached mid-receive (completed: %v)", c, got)
		}
	}
}

var skewSchemes atomic.Int64

// TestClockOffset: with the broker's clock an hour ahead of or behind this
// machine's, a lease's expiry is still the lock's real expiry on this
// machine's clock (so the lease is not taken as lost at once, nor renewed
// too late), and a delayed requeue or push still waits for its delay.
// Before the fix the broker's times were used as they were.
func TestClockOffset(t *testing.T) {
	t.Parallel()
	if env.emu == nil {
		t.Skip("needs an emulator with a clock offset")
	}
	for _, offset := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(offset.String(), func(t *testing.T) {
			t.Parallel()
			e := emu.Start(t, emu.Options{LockDuration: lockDuration, ClockOffset: offset})
			scheme := fmt.Sprintf("sbskew%d", skewSchemes.Add(1))
			if err := jobq.Register(scheme, &servicebus.URLOpener{ConnectionString: e.ConnectionString()}); err != nil {
				t.Fatal(err)
			}
			q, _ := open(t, fmt.Sprintf("%s://emulator/skew?admin=127.0.0.1:%d&create=true&lock_duration=%v", scheme, e.AdminPort, lockDuration))
			ctx := ctxT(t)
			if _, err := q.Push(ctx, &jobq.Task{Command: "skewed"}); err != nil {
				t.Fatal(err)
			}
			got := receive(t, q)
			if left := time.Until(got.Expiry()); left <= 0 || left > lockDuration+time.Second {
				t.Fatalf("lease expires in %v, want the lock's %v", left, lockDuration)
			}
			select {
			case <-got.LockLost():
				t.Fatal("the lease was taken as lost at once")
			default:
			}
			if err := got.Renew(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if left := time.Until(got.Expiry()); left <= 0 || left > lockDuration+time.Second {
				t.Fatalf("renewed lease expires in %v, want the lock's %v", left, lockDuration)
			}
			start := time.Now()
			if err := got.Requeue(ctx, 3*time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: time.Second}); !errors.Is(err, jobq.ErrEmpty) {
				t.Fatalf("receive right after Requeue(3s) = %v, want nothing yet", err)
			}
			again := receive(t, q)
			if waited := time.Since(start); waited < 2*time.Second {
				t.Fatalf("the requeued task came back after %v, want about 3s", waited)
			}
			if err := again.Complete(ctx); err != nil {
				t.Fatal(err)
			}
			// a delayed push from the same queue, which has seen the broker's clock
			if _, err := q.Push(ctx, &jobq.Task{Command: "later", NotBefore: time.Now().Add(3 * time.Second)}); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: time.Second}); !errors.Is(err, jobq.ErrEmpty) {
				t.Fatalf("receive right after a push 3s ahead = %v, want nothing yet", err)
			}
			if later := receive(t, q); later.Task.Command != "later" {
				t.Fatalf("received %q, want the delayed push", later.Task.Command)
			}
		})
	}
}

// TestRequeueDeadLettersOutlastingTheirLocks requeues a batch of dead
// letters that takes longer to settle than their locks last (each
// completion is acknowledged 2s late, the lock lasts 5s). The batch is
// locked at once and settled one by one, so the last ones used to be sent
// back to the queue and then fail to complete with LockLost: the requeue
// failed, and each of those tasks was both queued and still dead-lettered,
// to run twice once requeued again.
func TestRequeueDeadLettersOutlastingTheirLocks(t *testing.T) {
	t.Parallel()
	if env.emu == nil {
		t.Skip("needs the emulator's fault switches")
	}
	raw := newQueueURL(t)
	q, _ := open(t, raw)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	const tasks = 4
	for i := range tasks {
		if _, err := q.Push(ctx, &jobq.Task{Command: fmt.Sprintf("echo %d", i)}); err != nil {
			t.Fatal(err)
		}
		if err := receive(t, q).DeadLetter(ctx, "bad", ""); err != nil {
			t.Fatal(err)
		}
	}
	dlq := strings.Trim(u.Path, "/") + "/$DeadLetterQueue"
	if err := env.emu.SetFaults(ctx, dlq, emu.Faults{AckDelay: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	n, err := q.Admin().RequeueDeadLetters(ctx)
	if err != nil || n != tasks {
		t.Fatalf("requeue every dead letter: %d, %v; want %d, nil", n, err, tasks)
	}
	if err := env.emu.SetFaults(ctx, dlq, emu.Faults{}); err != nil {
		t.Fatal(err)
	}
	if dead, err := q.Admin().DeadLetters(ctx, 10); err != nil || len(dead) != 0 {
		t.Fatalf("dead letters left after the requeue: %d, %v", len(dead), err)
	}
	got := drain(t, q, 2*time.Second)
	for i := range tasks {
		if c := got[fmt.Sprintf("echo %d", i)]; c != 1 {
			t.Fatalf("task %d queued %d times after the requeue; want once (%v)", i, c, got)
		}
	}
}
