package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// TestWorkerSurvivesRestart runs consumers against a private redis-server
// with appendonly yes and appendfsync always, kills the server with SIGKILL
// mid-run, starts it again on the same data directory, and checks that every
// pushed task is still completed: the consumers reconnect with backoff and
// nothing acknowledged before the crash is lost.
func TestWorkerSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills its own redis-server")
	}
	t.Parallel()
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, err := jobq.Open(ctx, newQueueURL(t, srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	const before, after = 1500, 500 // tasks pushed before and after the crash
	pushRange := func(lo, hi int) {
		var tasks []*jobq.Task
		for i := lo; i < hi; i++ {
			tasks = append(tasks, &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))})
		}
		// The push retries by itself while the server is down.
		if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
			t.Errorf("push %d..%d: %v", lo, hi, err)
		}
	}
	pushRange(0, before)

	var (
		mu       sync.Mutex
		seen     = map[string]bool{}
		errCount atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backoff := 10 * time.Millisecond
			for {
				select {
				case <-stop:
					return
				default:
				}
				env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: 2 * time.Second, Wait: 200 * time.Millisecond})
				if errors.Is(err, jobq.ErrEmpty) {
					continue
				}
				if err == nil {
					// The task ran. A Complete that fails may still have
					// been applied (the server died before replying); if
					// not, the task comes back when its lease ends.
					mu.Lock()
					seen[env.Task.ID] = true
					mu.Unlock()
					err = env.Complete(ctx)
				}
				if err != nil {
					// Redis is restarting: back off and try again.
					errCount.Add(1)
					time.Sleep(backoff)
					backoff = min(2*backoff, time.Second)
					continue
				}
				backoff = 10 * time.Millisecond
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }

	for count() < before/3 {
		time.Sleep(5 * time.Millisecond)
	}
	srv.kill()
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(300 * time.Millisecond)
		if err := srv.launch(); err != nil {
			t.Error(err)
		}
	}()
	pushRange(before, before+after) // while the server is down
	<-restarted

	// Run until every task was handled and the queue is empty: a task whose
	// Complete was lost in the crash is handled again after its lease.
	empty := func() bool {
		st, err := q.Admin().Stats(ctx)
		return err == nil && st.Ready+st.InFlight+st.Delayed == 0
	}
	deadline := time.Now().Add(90 * time.Second)
	for (count() < before+after || !empty()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if errCount.Load() == 0 {
		t.Fatal("no call failed: the server was not down while the consumers ran")
	}
	if got := count(); got != before+after {
		t.Fatalf("completed %d distinct tasks, want %d", got, before+after)
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready+st.InFlight+st.Delayed+st.Dead != 0 {
		t.Fatalf("stats after the run: %+v", st)
	}
	t.Logf("crash and restart cost the consumers %d failed calls; nothing was lost", errCount.Load())
}

// TestPushRetriesAcrossRestart pushes while the server is down and checks
// that the push waits it out (jobq.Options.PushRetry) and stores every
// task once.
func TestPushRetriesAcrossRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills its own redis-server")
	}
	t.Parallel()
	srv := startServer(t)
	ctx := testCtx(t)
	q, err := jobq.Open(ctx, newQueueURL(t, srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	srv.kill()
	const down = 700 * time.Millisecond
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(down)
		if err := srv.launch(); err != nil {
			t.Error(err)
		}
	}()
	var tasks []*jobq.Task
	for i := range 600 { // three script calls
		tasks = append(tasks, &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))})
	}
	start := time.Now()
	res, err := q.PushBatch(ctx, tasks, jobq.PushOptions{})
	took := time.Since(start)
	<-restarted
	if err != nil {
		t.Fatalf("push across a restart: %v", err)
	}
	if took < down {
		t.Fatalf("the push took %v, less than the %v the server was down: it did not wait", took, down)
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(tasks) || st.Ready != int64(len(tasks)) {
		t.Fatalf("%d results and %d ready tasks, want %d of each", len(res), st.Ready, len(tasks))
	}
}

// TestWaitingReceiverAfterRestart checks that a receiver waiting through a
// server restart still wakes on a push: the driver resubscribes to the
// announcement channel.
func TestWaitingReceiverAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills its own redis-server")
	}
	t.Parallel()
	srv := startServer(t)
	d := openURL(t, newQueueURL(t, srv.url()))
	ctx := testCtx(t)
	got := make(chan []*driver.Received, 1)
	go func() {
		for {
			// Errors while the server is down end a call; call again.
			recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Minute})
			if err == nil || ctx.Err() != nil {
				got <- recs
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for d.wake.Waiters() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	srv.kill()
	srv.start()
	// Wait until the relay has resubscribed and the receiver waits again.
	c := srv.client()
	for {
		n, err := c.PubSubNumSub(ctx, d.channel).Result()
		if err == nil && n[d.channel] == 1 && d.wake.Waiters() == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	push(t, d, msg("after-restart", 0))
	select {
	case recs := <-got:
		if len(recs) != 1 || recs[0].ID != "after-restart" {
			t.Fatalf("received %v", recs)
		}
	case <-time.After(20 * time.Second): // far below the one-minute wait
		t.Fatal("the waiting receiver did not wake on a push after the restart")
	}
}
