package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/tcpfault"
)

// received is what a background Receive returned.
type received struct {
	recs []*driver.Received
	err  error
}

// receiveInBackground runs one Receive on d that only a wake-up can end
// early: the URL's poll is an hour.
func receiveInBackground(ctx context.Context, d *Driver) chan received {
	out := make(chan received, 1)
	go func() {
		recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
		out <- received{recs, err}
	}()
	return out
}

// leaveWaiting receives from d's empty queue and gives up once d's handle
// is registered, the queue's n-th (as via counts them): a receiver gone,
// its handle left behind. A receive with a fixed short deadline could end
// before the registration on a loaded machine.
func leaveWaiting(t *testing.T, d, via *Driver, n int) {
	t.Helper()
	ctx, leave := context.WithCancel(ctxT(t))
	defer leave()
	out := receiveInBackground(ctx, d)
	untilWaiting(t, via, n)
	leave()
	if r := <-out; len(r.recs) != 0 {
		t.Fatalf("receive on an empty queue: %v", r.recs)
	}
	untilWaiting(t, via, n)
}

// waitingHandles returns the queue's registered handles.
func waitingHandles(t *testing.T, d *Driver) []string {
	t.Helper()
	rows, err := d.pool.Query(ctxT(t), `SELECT handle FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.waiters WHERE queue = $1 ORDER BY handle`, d.cfg.queue)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// untilWaiting waits until the queue has n registered handles.
func untilWaiting(t *testing.T, d *Driver, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(waitingHandles(t, d)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d handles registered as waiting, want %d", len(waitingHandles(t, d)), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wakeWatch counts the wake-ups sent to the handles of ds.
type wakeWatch struct {
	t    *testing.T
	conn *pgx.Conn
	of   map[string]int // channel -> index in ds
}

func watchWakes(t *testing.T, ds ...*Driver) *wakeWatch {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), testConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	w := &wakeWatch{t: t, conn: conn, of: map[string]int{}}
	for i, d := range ds {
		ch := wakePrefix + d.handle
		w.of[ch] = i
		if _, err := conn.Exec(ctxT(t), "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// woken returns the indexes of the handles woken since the last call,
// waiting quiet for a moment.
func (w *wakeWatch) woken() []int {
	w.t.Helper()
	var got []int
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		n, err := w.conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			slices.Sort(got)
			return got
		}
		got = append(got, w.of[n.Channel])
	}
}

// TestPushWakesOneHandlePerTask: with four processes waiting on an empty
// queue, a push of one task wakes one of them, whose receiver takes the
// task, and a push of two tasks wakes two; the others go on waiting,
// still registered.
func TestPushWakesOneHandlePerTask(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	ds := []*Driver{openURL(t, raw), openURL(t, raw), openURL(t, raw), openURL(t, raw)}
	producer := openURL(t, raw)
	watch := watchWakes(t, ds...)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	outs := make([]chan received, len(ds))
	for i, d := range ds {
		outs[i] = receiveInBackground(ctx, d)
	}
	untilWaiting(t, producer, len(ds))

	taken := 0
	for round, tasks := range []int{1, 2} {
		msgs := make([]*driver.Message, tasks)
		for i := range msgs {
			msgs[i] = msg(fmt.Sprintf("r%d-%d", round, i))
		}
		if _, err := producer.Push(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		woken := watch.woken()
		if len(woken) != tasks {
			t.Fatalf("a push of %d tasks woke handles %v; want %d of them", tasks, woken, tasks)
		}
		got := 0
		for _, i := range woken {
			r := <-outs[i]
			if r.err != nil {
				t.Fatal(r.err)
			}
			got += len(r.recs)
			outs[i] = nil
		}
		taken += tasks
		if got != tasks {
			t.Errorf("the woken receivers took %d tasks; want %d", got, tasks)
		}
		if n := len(waitingHandles(t, producer)); n != len(ds)-taken {
			t.Errorf("%d handles wait after the push; want %d", n, len(ds)-taken)
		}
	}
	for i, out := range outs {
		if out == nil {
			continue
		}
		select {
		case r := <-out:
			t.Errorf("handle %d, not woken, returned %d messages (%v)", i, len(r.recs), r.err)
		default:
		}
	}
}

// TestWakePassedOn: a handle registered with no receiver waiting any more
// (its receiver gave up) is woken first, being the oldest, and passes the
// wake-up on to another waiting handle, whose receiver takes the task.
func TestWakePassedOn(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	gone, waiting, producer := openURL(t, raw), openURL(t, raw), openURL(t, raw)
	watch := watchWakes(t, gone, waiting)
	leaveWaiting(t, gone, producer, 1)
	out := receiveInBackground(ctxT(t), waiting)
	untilWaiting(t, producer, 2)

	if _, err := producer.Push(ctxT(t), []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-out:
		if r.err != nil || len(r.recs) != 1 {
			t.Fatalf("the waiting handle's receive: %d messages, %v", len(r.recs), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the task was not passed on to the waiting handle")
	}
	if got := watch.woken(); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("woken handles %v; want the gone one, then the waiting one", got)
	}
}

// TestOwnPushWakesOtherHandles: a process's push wakes the waiting handles
// of other processes through the server, and not its own, whose receivers
// it wakes itself: its handle stays registered, and no notification comes
// to its LISTEN connection. A push in the application's transaction
// (PushTx) wakes its own handle too, since only the commit may wake
// anyone.
func TestOwnPushWakesOtherHandles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		inTx  bool
		woken []int // of own (0) and other (1)
	}{
		{"push", false, []int{1}},
		{"push-tx", true, []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := newQueueURL(t, "poll=1h")
			own, other := openURL(t, raw), openURL(t, raw)
			watch := watchWakes(t, own, other)
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			outs := []chan received{receiveInBackground(ctx, own)}
			untilWaiting(t, own, 1)
			outs = append(outs, receiveInBackground(ctx, other))
			untilWaiting(t, own, 2)

			msgs := []*driver.Message{msg("a"), msg("b")}
			if tt.inTx {
				tx, err := own.pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := own.PushTx(ctx, tx, msgs); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			} else if _, err := own.Push(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			if got := watch.woken(); !slices.Equal(got, tt.woken) {
				t.Errorf("woken handles %v; want %v (0 the pushing process's, 1 the other's)", got, tt.woken)
			}
			got := 0
			for i, out := range outs {
				select {
				case r := <-out:
					if r.err != nil {
						t.Fatal(r.err)
					}
					got += len(r.recs)
				case <-time.After(10 * time.Second):
					t.Fatalf("receiver %d was not woken by the push of two tasks", i)
				}
			}
			if got != len(msgs) {
				t.Errorf("the receivers took %d tasks; want %d", got, len(msgs))
			}
			if !tt.inTx && !slices.Contains(waitingHandles(t, own), own.handle) {
				t.Error("the pushing process's handle was taken out of the waiting ones")
			}
		})
	}
}

// TestOwnPushWithLostReplyWakesItsReceivers: a push whose reply is lost
// may have committed, and its wake-up passed over its own process's
// handle: the process wakes its own receivers, which find the task long
// before their poll (an hour here).
func TestOwnPushWithLostReplyWakesItsReceivers(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("%s-%d-%d", t.Name(), time.Now().UnixNano(), queueSeq.Add(1))
	p, proxied, _ := tcpfault.ForTest(t, "JOBQ_TEST_POSTGRES_URL", testBaseURL(),
		map[string]string{"schema": testSchema, "queue": name, "poll": "1h"})
	own := openURL(t, proxied)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	out := receiveInBackground(ctx, own)
	untilWaiting(t, own, 1)
	const id = "lost-reply-marker"
	p.Arm(tcpfault.Rule{Fault: tcpfault.DropReply, Match: tcpfault.Contains(id)})
	if _, err := own.Push(ctxT(t), []*driver.Message{msg(id)}); err == nil {
		t.Fatal("the push's reply was dropped, yet it reported success")
	}
	if p.Fired() != 1 {
		t.Fatalf("%d replies dropped, want the push's", p.Fired())
	}
	select {
	case r := <-out:
		if r.err != nil || len(r.recs) != 1 {
			t.Fatalf("receive: %d messages, %v; want the pushed one", len(r.recs), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver sleeps with the task of a push whose reply was lost queued")
	}
}

// TestOwnPushPassesNoWakeOn: a process's own push wakes its receivers at
// once, in the process; one of them that was claiming meanwhile, and
// leaves with that wake-up unused, passes it to no other process: the
// push woke whom it had to through the server. Each such pass was a
// statement, about one per push where a worker pushes its own tasks, and
// woke a handle for nothing.
func TestOwnPushPassesNoWakeOn(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	own, other := openURL(t, raw), openURL(t, raw)
	w := own.wake.Add() // a receiver of own, claiming
	if _, err := own.Push(ctxT(t), []*driver.Message{msg("x")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
	default:
		t.Fatal("the push did not wake its own process's receiver")
	}
	if recs, err := own.Receive(ctxT(t), driver.ReceiveParams{Max: 1, Visibility: time.Minute}); err != nil || len(recs) != 1 {
		t.Fatalf("receive: %d messages, %v", len(recs), err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	out := receiveInBackground(ctx, other)
	untilWaiting(t, own, 1)
	watch := watchWakes(t, other)
	own.leave(w)
	if got := watch.woken(); len(got) != 0 {
		t.Errorf("the unused wake-up of a process's own push woke another process's handle")
	}
	if n := len(waitingHandles(t, own)); n != 1 {
		t.Errorf("%d handles wait; want the other process's", n)
	}
	cancel()
	if r := <-out; len(r.recs) != 0 {
		t.Errorf("the other process received %d messages from an empty queue", len(r.recs))
	}
}

// TestNoPushPassesWaitingReceiverBy: tasks pushed one at a time, each
// once the previous one was received, at moments that fall anywhere in
// the receivers' cycle of completing, claiming, registering and sleeping,
// each reach a receiver that only a wake-up can end (its poll is an hour):
// a push never commits unseen between a claim that found nothing and the
// registration.
func TestNoPushPassesWaitingReceiverBy(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	consumers := []*Driver{openURL(t, raw)}
	producer := openURL(t, raw)
	ctx := ctxT(t)
	const tasks = 150
	got := make(chan string, tasks)
	for _, c := range consumers {
		go func() {
			for ctx.Err() == nil {
				recs, err := c.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Hour})
				if err != nil {
					return
				}
				for _, r := range recs {
					if errs := c.Complete(ctx, driver.Completions(r.Lease)); errs != nil && errs[0] != nil {
						t.Error(errs[0])
					}
					got <- r.ID
				}
			}
		}()
	}
	untilWaiting(t, producer, len(consumers))
	for i := range tasks {
		// Pushed 0 to 2 ms after the previous task was received: while
		// its receiver completes it, claims again, registers or sleeps.
		time.Sleep(time.Duration(i%9) * 250 * time.Microsecond)
		id := fmt.Sprintf("t%d", i)
		if _, err := producer.Push(ctx, []*driver.Message{msg(id)}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("task %d of %d was not received: no receiver was woken for it", i+1, tasks)
		}
	}
}

// TestPushBetweenClaimAndRegistration: a push that commits after a
// receiver's claim found nothing but before its handle is registered, or
// that is still in flight while it registers, is not passed by: the
// receiver, which only a wake-up or a claim can end (its poll is an hour),
// gets the task.
func TestPushBetweenClaimAndRegistration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		inFlight bool // the push's transaction is open during the registration
	}{
		{name: "committed"},
		{name: "in-flight", inFlight: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := newQueueURL(t, "poll=1h")
			consumer, producer := openURL(t, raw), openURL(t, raw)
			ctx := ctxT(t)
			consumer.startListener()
			for !consumer.listening.Load() {
				time.Sleep(time.Millisecond)
			}
			var once sync.Once
			committed := make(chan error, 1)
			consumer.beforeAwait = func() {
				once.Do(func() {
					if !tt.inFlight {
						_, err := producer.Push(ctx, []*driver.Message{msg("a")})
						committed <- err
						return
					}
					tx, err := producer.pool.Begin(ctx)
					if err != nil {
						committed <- err
						return
					}
					if _, err := producer.push(ctx, tx, []*driver.Message{msg("a")}, pushWake{inline: true, self: producer.handle}); err != nil {
						committed <- err
						return
					}
					go func() {
						time.Sleep(200 * time.Millisecond) // registrations meanwhile find the push in flight
						committed <- tx.Commit(ctx)
					}()
				})
			}
			out := receiveInBackground(ctx, consumer)
			if err := <-committed; err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-out:
				if r.err != nil || len(r.recs) != 1 {
					t.Fatalf("receive: %d messages, %v; want the pushed one", len(r.recs), r.err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the push passed the receiver by: it sleeps with the task queued")
			}
		})
	}
}
