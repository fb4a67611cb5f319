package jobq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/redis"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/tools/testkit/tcpfault"
)

// redisThroughProxy opens a fresh Redis queue through a tcpfault proxy,
// and the same queue directly; it skips the test when Redis is not
// running.
func redisThroughProxy(t *testing.T) (p *tcpfault.Proxy, q, direct *jobq.Queue) {
	t.Helper()
	p, proxied, directURL := tcpfault.ForTest(t, "JOBQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0", map[string]string{"prefix": "jobqtest"})
	direct = openURL(t, directURL)
	q = openURL(t, proxied)
	t.Cleanup(func() {
		_, _ = direct.Admin().PurgeDeadLetters(context.Background())
		_, _ = direct.Admin().Clear(context.Background())
		_, _ = direct.Admin().UnsetPolicy(context.Background(), driver.ConcurrencyPolicy, "k")
	})
	return p, q, direct
}

func openURL(t *testing.T, s string) *jobq.Queue {
	t.Helper()
	q, err := jobq.Open(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// TestWritesWhoseAnswerWasLost drops the reply to writes other than
// pushes and settlements (a dead letter requeued, a policy set, a lease
// renewed): each is applied, and its error must say so may be
// (MaybeApplied), not pass for a change that was not made.
func TestWritesWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drop := func(p *tcpfault.Proxy, cmd string) {
		p.Arm(tcpfault.Rule{Fault: tcpfault.DropReply, Match: tcpfault.Contains(cmd)})
	}
	check := func(t *testing.T, p *tcpfault.Proxy, err error, applied bool) {
		t.Helper()
		if p.Fired() != 1 {
			t.Fatalf("the proxy dropped %d replies, want 1", p.Fired())
		}
		if !applied {
			t.Fatalf("the write whose reply was dropped was not applied (%v)", err)
		}
		var je *jobq.Error
		if !errors.As(err, &je) || !je.MaybeApplied {
			t.Errorf("error %v; want an *Error with MaybeApplied", err)
		}
	}
	t.Run("dlq requeue", func(t *testing.T) {
		p, q, direct := redisThroughProxy(t)
		if _, err := direct.Push(ctx, &jobq.Task{Command: "echo dead"}); err != nil {
			t.Fatal(err)
		}
		env, err := direct.Receive(ctx, jobq.ReceiveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := env.DeadLetter(ctx, "test", ""); err != nil {
			t.Fatal(err)
		}
		dead, err := direct.Admin().DeadLetters(ctx, 1)
		if err != nil || len(dead) != 1 {
			t.Fatalf("dead letters %v, %v", dead, err)
		}
		// A requeue that finds nothing first, so that Redis holds the
		// script: on a server that has not run it yet, the dropped reply
		// would be the NOSCRIPT refusal, and nothing would be applied.
		if n, err := q.Admin().RequeueDeadLetters(ctx, "no-such-letter"); err != nil || n != 0 {
			t.Fatalf("requeue of no letter: %d, %v", n, err)
		}
		drop(p, "evalsha")
		_, err = q.Admin().RequeueDeadLetters(ctx, dead[0].MessageID)
		n, _ := direct.Admin().Size(ctx)
		check(t, p, err, n == 1)
	})
	t.Run("policy set", func(t *testing.T) {
		p, q, direct := redisThroughProxy(t)
		drop(p, "hset")
		err := q.Admin().SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 3})
		pols, _ := direct.Admin().Policies(ctx)
		check(t, p, err, len(pols) == 1)
	})
	t.Run("renew", func(t *testing.T) {
		p, q, _ := redisThroughProxy(t)
		if _, err := q.Push(ctx, &jobq.Task{Command: "echo renew"}); err != nil {
			t.Fatal(err)
		}
		env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		drop(p, "evalsha")
		err = env.Renew(ctx, 5*time.Minute)
		// Applied: the lease still holds, and completing it works.
		check(t, p, err, env.Complete(ctx) == nil)
	})
}

// TestReceiveWhoseAnswerWasLost drops the reply to a claim: the message is
// claimed (hidden for its lease), and the error must say the receive may
// have taken effect.
func TestReceiveWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, q, direct := redisThroughProxy(t)
	engines.WarmUp(t, q)
	if _, err := direct.Push(ctx, &jobq.Task{Command: "echo claimed"}); err != nil {
		t.Fatal(err)
	}
	p.Arm(tcpfault.Rule{Fault: tcpfault.DropReply, Match: tcpfault.Contains("evalsha")})
	_, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
	st, serr := direct.Admin().Stats(ctx)
	if serr != nil {
		t.Fatal(serr)
	}
	if p.Fired() != 1 || st.InFlight != 1 {
		t.Fatalf("%d replies dropped, %d messages in flight; want the claim applied and its reply dropped (%v)", p.Fired(), st.InFlight, err)
	}
	var je *jobq.Error
	if !errors.As(err, &je) || !je.MaybeApplied {
		t.Errorf("error %v; want an *Error with MaybeApplied", err)
	}
}

// TestPushNeverSentIsNotStored stalls the replies to eight lone pushes, so
// that a ninth waits in the Redis driver's push group to be sent with
// others; its context ends while it waits. It was never sent, so its
// error must say it was not stored (no MaybeApplied).
func TestPushNeverSentIsNotStored(t *testing.T) {
	t.Parallel()
	p, q, direct := redisThroughProxy(t)
	ctx := context.Background()
	const inFlight = 8 // the driver's lone pushes in flight at once
	engines.WarmUp(t, q)
	p.Arm(tcpfault.Rule{Fault: tcpfault.StallReply, Times: inFlight, Match: tcpfault.Contains("evalsha")})
	stalled := make(chan error, inFlight)
	for i := range inFlight {
		go func() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := q.Push(sctx, &jobq.Task{Command: fmt.Sprintf("echo stalled %d", i)})
			stalled <- err
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); p.Fired() < inFlight; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d pushes stalled, want %d", p.Fired(), inFlight)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := q.Push(wctx, &jobq.Task{Command: "echo waited"})
	for range inFlight {
		<-stalled
	}
	var je *jobq.Error
	if !errors.As(err, &je) || je.MaybeApplied {
		t.Errorf("error %v; want an *Error without MaybeApplied: the push was never sent", err)
	}
	if n, err := direct.Admin().Size(ctx); err != nil || n != inFlight {
		t.Errorf("the queue holds %d tasks (%v), want the %d stalled ones", n, err, inFlight)
	}
}

// TestWaitOutlivesAnOutage: the engine goes away for a moment while a wait
// waits (its connections reset, new ones refused, as in a restart); the
// wait goes on, and reports the task that ended meanwhile.
func TestWaitOutlivesAnOutage(t *testing.T) {
	t.Parallel()
	p, q, direct := redisThroughProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := direct.Push(ctx, &jobq.Task{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{})
	var once sync.Once
	p.Watch(func(b []byte) {
		if bytes.Contains(b, []byte(res.ID)) {
			once.Do(func() { close(asked) })
		}
	})
	type waited struct {
		rs  []*jobq.Result
		err error
	}
	done := make(chan waited, 1)
	go func() {
		rs, err := q.Wait(ctx, res.ID)
		done <- waited{rs, err}
	}()
	<-asked // the wait has read the records once
	p.SetOut(true)
	env, err := direct.Receive(ctx, jobq.ReceiveOptions{})
	if err != nil || env == nil {
		t.Fatalf("Receive = %v, %v", env, err)
	}
	if err := env.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the outage lasts a while
	p.SetOut(false)
	w := <-done
	if w.err != nil || len(w.rs) != 1 || w.rs[0] == nil || w.rs[0].State != driver.ResultSucceeded {
		t.Fatalf("Wait across an outage = %v, %v; want the task's success", w.rs, w.err)
	}
}
