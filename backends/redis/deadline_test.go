package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
)

// TestDeadlineDuringCall: a call whose context deadline passes while Redis
// has not answered (here, clients paused) fails as the deadline, as on the
// other backends: code DeadlineExceeded, matching context.DeadlineExceeded,
// with MaybeApplied for a write. The go-redis client turns the deadline
// into the socket's, and so reports an "i/o timeout", which is not the
// engine being unavailable: a push must not be retried past the caller's
// deadline, nor a caller told to wait for the engine.
func TestDeadlineDuringCall(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx := context.Background()
	q, err := jobq.Open(ctx, newQueueURL(t, srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.PushBatch(ctx, []*jobq.Task{{Command: "echo done"}, {Command: "echo held"}}, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	envs, err := q.ReceiveBatch(ctx, 2, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
	if err != nil || len(envs) != 2 {
		t.Fatalf("receive: %d messages, %v; want 2", len(envs), err)
	}
	// The first settlement of a handle loads the queue's policies.
	if err := envs[0].Complete(ctx); err != nil {
		t.Fatal(err)
	}
	e := envs[1]
	c := srv.client()
	if err := c.Do(ctx, "CLIENT", "PAUSE", "60000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Do(ctx, "CLIENT", "UNPAUSE")

	calls := []struct {
		op    string
		write bool
		call  func(context.Context) error
	}{
		{"push", true, func(ctx context.Context) error {
			_, err := q.Push(ctx, &jobq.Task{Command: "echo late"})
			return err
		}},
		{"receive", true, func(ctx context.Context) error {
			_, err := q.Receive(ctx, jobq.ReceiveOptions{})
			return err
		}},
		{"complete", true, e.Complete},
		{"size", false, func(ctx context.Context) error {
			_, err := q.Admin().Size(ctx)
			return err
		}},
	}
	for _, tc := range calls {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := tc.call(cctx)
		cancel()
		if errcode.Of(err) != errcode.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s past its deadline: %v (code %v); want code DeadlineExceeded matching context.DeadlineExceeded", tc.op, err, errcode.Of(err))
		}
		var je *jobq.Error
		if tc.write && (!errors.As(err, &je) || !je.MaybeApplied) {
			t.Errorf("%s past its deadline: %v; want MaybeApplied (the call may have reached Redis)", tc.op, err)
		}
	}
}

// lateTimer is a context whose deadline is dl and whose Err is still nil,
// as a context is between its deadline and its timer's firing.
type lateTimer struct {
	context.Context
	dl time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.dl, true }

// TestCtxEndedBeforeItsTimer: a socket timeout seen before the context's
// timer fired is the deadline's (TestDeadlineDuringCall failed in CI on
// that race, calling it Unavailable), and a deadline still ahead is not.
func TestCtxEndedBeforeItsTimer(t *testing.T) {
	t.Parallel()
	if err := ctxEnded(lateTimer{context.Background(), time.Now().Add(-time.Millisecond)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctxEnded past the deadline, before the timer = %v; want context.DeadlineExceeded", err)
	}
	if err := ctxEnded(lateTimer{context.Background(), time.Now().Add(time.Hour)}); err != nil {
		t.Errorf("ctxEnded before the deadline = %v; want nil", err)
	}
}
