package jobq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// slowComplete is a mem driver whose Complete waits for release, as one
// whose answer is slow to come: the completion is applied once released.
type slowComplete struct {
	driver.Driver
	entered chan struct{}
	release chan struct{}
}

func (s slowComplete) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Driver.Complete(ctx, reqs)
}

// TestCompleteStoppedWaitingMaybeApplied: a Complete whose caller stops
// waiting after handing the completion over says it may have been applied
// (MaybeApplied, the context's code), and it was; settling again then
// fails with LockLost, and so does every later settlement, not "already
// settled". A Complete under a context that ended before it was sent says
// nothing was applied.
func TestCompleteStoppedWaitingMaybeApplied(t *testing.T) {
	t.Parallel()
	d, err := mem.New(mem.Options{Queue: "stopped-waiting"})
	if err != nil {
		t.Fatal(err)
	}
	sd := slowComplete{Driver: d, entered: make(chan struct{}, 1), release: make(chan struct{})}
	q, err := jobq.New(sd, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	release := sync.OnceFunc(func() { close(sd.release) })
	defer release() // before Close, which waits for the driver call
	bg := context.Background()
	if _, err := q.PushBatch(bg, []*jobq.Task{{Command: "a"}, {Command: "b"}}, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	envs, err := q.ReceiveBatch(bg, 2, jobq.ReceiveOptions{Visibility: time.Minute})
	if err != nil || len(envs) != 2 {
		t.Fatalf("receive = %d, %v; want 2", len(envs), err)
	}

	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- envs[0].Complete(ctx) }()
	<-sd.entered // the driver call is under way
	cancel()
	err = <-done
	var je *jobq.Error
	if !errors.As(err, &je) || !je.MaybeApplied || !errors.Is(err, context.Canceled) {
		t.Fatalf("Complete abandoned mid-call = %v; want a *jobq.Error with MaybeApplied, matching context.Canceled", err)
	}
	release() // the completion goes through
	for i := 0; ; i++ {
		if n, err := q.Admin().Size(bg); err == nil && n == 1 {
			break
		}
		if i == 1000 {
			t.Fatal("the abandoned completion was not applied")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, settle := range []func() error{
		func() error { return envs[0].Complete(bg) },
		func() error { return envs[0].DeadLetter(bg, "r", "") },
		func() error { return envs[0].Requeue(bg, 0) },
	} {
		if err := settle(); !errors.Is(err, errcode.LockLost) {
			t.Errorf("settling the completed message again = %v; want LockLost", err)
		}
	}

	gone, cancelGone := context.WithCancel(bg)
	cancelGone()
	err = envs[1].Complete(gone)
	if !errors.Is(err, context.Canceled) || !errors.As(err, &je) || je.MaybeApplied {
		t.Fatalf("Complete under an ended context = %v; want Canceled without MaybeApplied", err)
	}
	if err := envs[1].Complete(bg); err != nil {
		t.Fatalf("Complete after one that was never sent = %v", err)
	}
}

// TestReceiveNegativeWait: a negative wait other than WaitForever (one
// computed from a deadline that has passed, say) is refused at once with
// InvalidArgument instead of waiting forever, and claims nothing.
func TestReceiveNegativeWait(t *testing.T) {
	t.Parallel()
	q, err := jobq.Open(t.Context(), "mem://negative-wait")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(t.Context(), &jobq.Task{Command: "a"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: -2 * time.Second}); errcode.Of(err) != errcode.InvalidArgument {
		t.Fatalf("Receive with Wait -2s = %v; want InvalidArgument", err)
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 1 {
		t.Fatalf("size after the refused receive = %d, %v; want the task still queued", n, err)
	}
	if e, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: jobq.WaitForever}); err != nil || e == nil {
		t.Fatalf("Receive with WaitForever = %v, %v; want the task", e, err)
	}
}
