package redis

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
)

// TestACLRefusalInScript pushes as a Redis user whose ACL lacks PUBLISH
// while a receiver waits, so the push script stores the task and then is
// refused the PUBLISH that wakes the receiver. Redis reports that as an
// ERR, not NOPERM: the push must fail with PermissionDenied, say that the
// task may be stored (it is) and name what the user needs, not the
// password.
//
// (The receiver is not woken; it finds the task on its next receive.)
func TestACLRefusalInScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own redis-server")
	}
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.client().Do(ctx, "ACL", "SETUSER", "nopub", "on", ">s3cret-pw", "~*", "&*", "+@all", "-publish").Err(); err != nil {
		t.Fatal(err)
	}
	raw := newQueueURL(t, srv.url())
	w, err := jobq.Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rctx, stopReceiving := context.WithCancel(ctx)
	received := make(chan struct{})
	go func() {
		defer close(received)
		_, _ = w.Receive(rctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 30 * time.Second})
	}()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("nopub", "s3cret-pw")
	q, err := jobq.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// Push once the receiver waits: its handle is in the waiters set.
	waiters := testPrefix + ":{" + u.Query().Get("queue") + "}:waiters"
	for {
		n, err := srv.client().ZCard(ctx, waiters).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = q.Push(ctx, &jobq.Task{Command: "echo acl"})
	var je *jobq.Error
	switch {
	case !errors.Is(err, errcode.PermissionDenied):
		t.Fatalf("push refused PUBLISH inside its script: %v; want PermissionDenied", err)
	case !errors.As(err, &je) || !je.MaybeApplied:
		t.Fatalf("push refused PUBLISH after storing the task: %v; want MaybeApplied", err)
	case !strings.Contains(err.Error(), "PUBLISH"), strings.Contains(err.Error(), "s3cret-pw"):
		t.Fatalf("push error %q: want it to name PUBLISH and not the password", err)
	}
	stopReceiving()
	<-received
	st, err := q.Admin().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready+st.InFlight != 1 {
		t.Fatalf("stats %+v: the refused push stored its task, want it queued", st)
	}
}
