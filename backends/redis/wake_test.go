package redis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
)

// wakeWatch records every wake-up published to the queue handles of d's
// queue (P..'w:*').
type wakeWatch struct {
	t   *testing.T
	d   *Driver
	sub *goredis.PubSub
}

func watchWakes(t *testing.T, d *Driver) *wakeWatch {
	t.Helper()
	ctx := testCtx(t)
	sub := d.client.PSubscribe(ctx, d.prefix+"w:*")
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	return &wakeWatch{t: t, d: d, sub: sub}
}

// since returns the wake-ups published since the last call, as
// "handle id=payload", closing with a sentinel of its own so that no wait
// is timed.
func (w *wakeWatch) since() []string {
	w.t.Helper()
	ctx := testCtx(w.t)
	sentinel := w.d.prefix + "w:~sentinel"
	if err := w.d.client.Publish(ctx, sentinel, "end").Err(); err != nil {
		w.t.Fatal(err)
	}
	var got []string
	for {
		m, err := w.sub.ReceiveMessage(ctx)
		if err != nil {
			w.t.Fatal(err)
		}
		if m.Channel == sentinel {
			return got
		}
		got = append(got, strings.TrimPrefix(m.Channel, w.d.prefix+"w:")+"="+m.Payload)
	}
}

// waitingHandles is how many handles are in the queue's waiting set.
func waitingHandles(t *testing.T, d *Driver) int64 {
	t.Helper()
	n, err := d.client.ZCard(testCtx(t), d.prefix+"waiters").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// untilWaitingHandles polls until n handles wait.
func untilWaitingHandles(t *testing.T, d *Driver, n int64) {
	t.Helper()
	for waitingHandles(t, d) != n {
		if testCtx(t).Err() != nil {
			t.Fatalf("%d handles wait, want %d", waitingHandles(t, d), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitOnce makes d's handle a waiting one: a waiting receive on an empty
// queue, which returns at once and leaves the handle in the waiting set.
func waitOnce(t *testing.T, d *Driver) {
	t.Helper()
	recs, err := d.Receive(testCtx(t), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Millisecond})
	if err != nil || len(recs) != 0 {
		t.Fatalf("waiting receive on an empty queue: %v, %v", recs, err)
	}
}

// received is the outcome of a receive run in the background.
type received struct {
	recs []*driver.Received
	err  error
}

// receiveInBackground starts a receive that waits up to wait on d.
func receiveInBackground(ctx context.Context, d *Driver, wait time.Duration) chan received {
	out := make(chan received, 1)
	go func() {
		recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: wait})
		out <- received{recs, err}
	}()
	return out
}

// TestWakesOnlyWaitingHandles: a push or requeue wakes a queue handle only
// while a receiver of it waits, so a busy queue pays no announcement per
// push; and a wake-up takes the handle out of the waiting set, so the next
// push does not go to it until a receiver of it waits again.
func TestWakesOnlyWaitingHandles(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	watch := watchWakes(t, d)

	push(t, d, msg("a", 0))
	if got := watch.since(); len(got) != 0 {
		t.Fatalf("a push with no receiver waiting woke %v", got)
	}
	// A receiver that does not wait leaves no entry; nor does a requeue
	// wake anyone without one.
	recs := receive(t, d, 1, time.Minute)
	if len(recs) != 1 {
		t.Fatalf("receive: %v", recs)
	}
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: recs[0].Lease}}); errs != nil {
		t.Fatal(errs)
	}
	if got := watch.since(); len(got) != 0 {
		t.Fatalf("a requeue with no receiver waiting woke %v", got)
	}
	if recs := receive(t, d, 1, time.Minute); len(recs) != 1 {
		t.Fatalf("receive after the requeue: %v", recs)
	}

	// A waiting receiver's empty claim puts the handle in the set, for
	// about waitMarkTTL; a push wakes it and takes it out.
	waitOnce(t, d)
	score, err := d.client.ZScore(ctx, d.prefix+"waiters", d.id).Result()
	if lasts := time.Until(time.UnixMilli(int64(score))); err != nil || lasts <= 0 || lasts > waitMarkTTL {
		t.Fatalf("the handle's entry lasts %v (%v); want up to %v", lasts, err, waitMarkTTL)
	}
	push(t, d, msg("b", 0))
	if got, want := watch.since(), []string{d.id + "=1"}; !slices.Equal(got, want) {
		t.Fatalf("a push while a receiver waits woke %v, want %v", got, want)
	}
	push(t, d, msg("c", 0))
	if got := watch.since(); len(got) != 0 {
		t.Fatalf("a push after the only waiting handle was woken woke %v", got)
	}

	// A batch, and a delayed message (its due time), which leaves the
	// handle in the set.
	receive(t, d, 2, time.Minute)
	waitOnce(t, d)
	late := msg("d", 0)
	late.NotBefore = time.Now().Add(time.Hour)
	push(t, d, late)
	if got := watch.since(); len(got) != 1 || !strings.HasPrefix(got[0], d.id+"=@") {
		t.Fatalf("a delayed push woke %v, want %s=@<ms>", got, d.id)
	}
	push(t, d, msg("e", 0), msg("f", 0))
	if got, want := watch.since(), []string{d.id + "=2"}; !slices.Equal(got, want) {
		t.Fatalf("a batch push woke %v, want %v", got, want)
	}

	// Requeues wake as pushes do: for what they make ready, or when it
	// comes due.
	held := receive(t, d, 2, time.Minute)
	if len(held) != 2 {
		t.Fatalf("receive: %v", held)
	}
	waitOnce(t, d)
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: held[0].Lease, Delay: time.Hour}}); errs != nil {
		t.Fatal(errs)
	}
	if got := watch.since(); len(got) != 1 || !strings.HasPrefix(got[0], d.id+"=@") {
		t.Fatalf("a delayed requeue woke %v, want %s=@<ms>", got, d.id)
	}
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: held[1].Lease}}); errs != nil {
		t.Fatal(errs)
	}
	if got, want := watch.since(), []string{d.id + "=1"}; !slices.Equal(got, want) {
		t.Fatalf("a requeue while a receiver waits woke %v, want %v", got, want)
	}
}

// TestWakeOnCluster runs the wake-up tests on a Redis Cluster, where a
// handle's subscription must reach the master of the queue's slot for the
// push to see that the handle listens.
func TestWakeOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	base := startCluster(t)
	t.Run("OnePushWakesOneHandle", func(t *testing.T) { onePushWakesOneHandle(t, newQueueURL(t, base)) })
	t.Run("WakePassedOn", func(t *testing.T) { wakePassedOn(t, newQueueURL(t, base)) })
}

// TestOnePushWakesOneHandle: with a receiver waiting on each of four
// handles (four worker processes), a push of one task wakes one handle,
// whose receiver takes the task; the others go on waiting.
func TestOnePushWakesOneHandle(t *testing.T) {
	t.Parallel()
	onePushWakesOneHandle(t, newQueueURL(t, ""))
}

func onePushWakesOneHandle(t *testing.T, u string) {
	ds := []*Driver{openURL(t, u), openURL(t, u), openURL(t, u), openURL(t, u)}
	watch := watchWakes(t, ds[0])
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	outs := make([]chan received, len(ds))
	for i, d := range ds {
		outs[i] = receiveInBackground(ctx, d, time.Minute)
	}
	untilWaitingHandles(t, ds[0], int64(len(ds)))

	push(t, ds[0], msg("a", 0))
	got := watch.since()
	if len(got) != 1 || !strings.HasSuffix(got[0], "=1") {
		t.Fatalf("a push of one task woke %v, want one handle", got)
	}
	winner := -1
	for i, d := range ds {
		if strings.HasPrefix(got[0], d.id+"=") {
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("the push woke %s, none of the queue's handles", got[0])
	}
	if r := <-outs[winner]; r.err != nil || len(r.recs) != 1 || r.recs[0].ID != "a" {
		t.Fatalf("the woken handle's receive: %v, %v", r.recs, r.err)
	}
	if n := waitingHandles(t, ds[0]); n != int64(len(ds)-1) {
		t.Errorf("%d handles wait after the push, want %d", n, len(ds)-1)
	}
	cancel()
	for i, out := range outs {
		if i == winner {
			continue
		}
		if r := <-out; len(r.recs) != 0 {
			t.Errorf("handle %d, not woken, received %v", i, r.recs)
		}
	}
}

// TestWakePassedOn: a handle woken with no receiver waiting (it left the
// waiting set's entry behind when its receiver stopped) passes the wake-up
// on to another waiting handle, whose receiver takes the task.
func TestWakePassedOn(t *testing.T) {
	t.Parallel()
	wakePassedOn(t, newQueueURL(t, ""))
}

func wakePassedOn(t *testing.T, u string) {
	waiting, gone := openURL(t, u), openURL(t, u)
	watch := watchWakes(t, waiting)
	out := receiveInBackground(testCtx(t), waiting, time.Minute)
	untilWaitingHandles(t, waiting, 1)
	// gone's entry is the newer, so the push wakes it first (ZPOPMAX).
	time.Sleep(5 * time.Millisecond)
	waitOnce(t, gone)

	push(t, waiting, msg("a", 0))
	r := <-out
	if r.err != nil || len(r.recs) != 1 || r.recs[0].ID != "a" {
		t.Fatalf("the waiting handle's receive: %v, %v", r.recs, r.err)
	}
	if got, want := watch.since(), []string{gone.id + "=1", waiting.id + "=1"}; !slices.Equal(got, want) {
		t.Fatalf("wake-ups %v, want %v", got, want)
	}
}

// TestOlderPushWakesReceiver: a push of an earlier release announces on
// the queue's notify channel while the waiting key exists; receivers set
// the key and still listen there, so such a push wakes them.
func TestOlderPushWakesReceiver(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	// Shorter than maxIdleWait: a receiver not woken returns empty.
	out := receiveInBackground(ctx, d, 20*time.Second)
	untilWaitingHandles(t, d, 1)
	if n, err := d.client.Exists(ctx, d.prefix+"waiting").Result(); err != nil || n != 1 {
		t.Fatalf("the waiting key for older pushes: %d, %v", n, err)
	}
	// The task goes in unannounced to the handle, as an older push does,
	// which then announces it on the shared channel.
	if err := d.client.Del(ctx, d.prefix+"waiters").Err(); err != nil {
		t.Fatal(err)
	}
	push(t, d, msg("a", 0))
	if err := d.client.Publish(ctx, d.channel, "1").Err(); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.err != nil || len(r.recs) != 1 || r.recs[0].ID != "a" {
		t.Fatalf("the waiting receiver after an older push: %v, %v", r.recs, r.err)
	}
}

// TestWakeSkipsGoneHandle: an entry left in the waiting set by a process
// that is gone (no one listens on its channel) is dropped, and the push
// wakes the next waiting handle instead.
func TestWakeSkipsGoneHandle(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	out := receiveInBackground(ctx, d, 20*time.Second)
	untilWaitingHandles(t, d, 1)
	// Newer than d's entry, so the push tries it first (ZPOPMAX).
	gone := "GONEHANDLE000000"
	if err := d.client.ZAdd(ctx, d.prefix+"waiters", goredis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: gone}).Err(); err != nil {
		t.Fatal(err)
	}
	push(t, d, msg("a", 0))
	if r := <-out; r.err != nil || len(r.recs) != 1 || r.recs[0].ID != "a" {
		t.Fatalf("the waiting handle's receive: %v, %v", r.recs, r.err)
	}
	if _, err := d.client.ZScore(ctx, d.prefix+"waiters", gone).Result(); !errors.Is(err, goredis.Nil) {
		t.Fatalf("the gone handle's entry is still there (%v)", err)
	}
}
