package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// listeningChannels is what d's LISTEN connection listens on.
func listeningChannels(t *testing.T, d *Driver) []string {
	t.Helper()
	var chans []string
	err := d.onListener(ctxT(t), func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT pg_listening_channels()`)
		if err != nil {
			return err
		}
		chans, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(chans)
	return chans
}

// untilTried waits until d's handle has tried for a seat: it holds one,
// or found them all taken.
func untilTried(t *testing.T, d *Driver) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !d.seated.Load() && !d.seatsFull.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the handle never tried for a seat")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSeatsBoundTheListeners: of four processes waiting on one queue with
// two seats, two register and LISTEN, and the other two listen on nothing,
// so that a push's commit signals two backends, not four; pushes reach
// the seated ones. (Every waiting process registered and listened.)
func TestSeatsBoundTheListeners(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	producer := openURL(t, raw)
	ctx := ctxT(t)
	var ds []*Driver
	var outs []chan received
	for range 4 {
		d := openURL(t, raw)
		d.listeners = 2
		ds = append(ds, d)
		outs = append(outs, receiveInBackground(ctx, d))
	}
	for _, d := range ds {
		untilTried(t, d)
	}
	if got := len(waitingHandles(t, producer)); got != 2 {
		t.Fatalf("%d handles registered as waiting; want 2 (the seats)", got)
	}
	listening := 0
	for _, d := range ds {
		chans := listeningChannels(t, d)
		switch {
		case d.seated.Load() && slices.Equal(chans, []string{wakePrefix + d.handle}):
			listening++
		case !d.seated.Load() && len(chans) == 0:
		default:
			t.Errorf("a process (seated %v) listens on %v", d.seated.Load(), chans)
		}
	}
	if listening != 2 {
		t.Errorf("%d processes listen; want 2", listening)
	}
	if _, err := producer.Push(ctx, []*driver.Message{msg("a"), msg("b")}); err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if !d.seated.Load() {
			continue
		}
		select {
		case r := <-outs[i]:
			if r.err != nil || len(r.recs) != 1 {
				t.Fatalf("seated receiver: %d messages, %v", len(r.recs), r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a seated receiver was not woken")
		}
	}
}

// TestSeatKeptAcrossWakeUps: a process whose handle a push woke finds its
// seat again when it next registers, though another process tried for
// one meanwhile: the listening processes stay the same from task to task.
// (Not bounded, there were no seats to keep.)
func TestSeatKeptAcrossWakeUps(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	seated, other, producer := openURL(t, raw), openURL(t, raw), openURL(t, raw)
	seated.listeners, other.listeners = 1, 1
	ctx := ctxT(t)
	out := receiveInBackground(ctx, seated)
	untilTried(t, seated)
	if !seated.seated.Load() {
		t.Fatal("the only process did not take the seat")
	}
	if _, err := producer.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.err != nil || len(r.recs) != 1 {
		t.Fatalf("receive: %d messages, %v", len(r.recs), r.err)
	}
	// The woken handle is out of the waiting ones; another process
	// tries for the seat, and finds it held.
	untilWaiting(t, producer, 0)
	otherOut := receiveInBackground(ctx, other)
	untilTried(t, other)
	if other.seated.Load() || len(waitingHandles(t, producer)) != 0 {
		t.Fatalf("another process took the seat of a woken one (seated %v, %d waiting)", other.seated.Load(), len(waitingHandles(t, producer)))
	}
	out = receiveInBackground(ctx, seated)
	untilWaiting(t, producer, 1)
	if !slices.Equal(waitingHandles(t, producer), []string{seated.handle}) {
		t.Fatal("the woken process did not register again")
	}
	if _, err := producer.Push(ctx, []*driver.Message{msg("b")}); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.err != nil || len(r.recs) != 1 {
		t.Fatalf("receive: %d messages, %v", len(r.recs), r.err)
	}
	select {
	case r := <-otherOut:
		t.Errorf("the process in standby returned: %d messages, %v", len(r.recs), r.err)
	default:
	}
}

// TestStandbyFindsTasksByPolling: a process in standby (the seats taken by
// one that is busy) takes a pushed task at its next look: no push is lost
// for want of a seat.
func TestStandbyFindsTasksByPolling(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("standby-%d", time.Now().UnixNano())
	raw := newQueueURL(t, "poll=1h", "queue="+name)
	holder, producer := openURL(t, raw), openURL(t, raw)
	holder.listeners = 1
	ctx := ctxT(t)
	leaveWaiting(t, holder, producer, 1) // the holder's seat, its receiver gone
	standby := openURL(t, newQueueURL(t, "poll=50ms", "queue="+name))
	standby.listeners = 1
	out := make(chan received, 1)
	go func() {
		recs, err := standby.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 20 * time.Second})
		out <- received{recs, err}
	}()
	untilTried(t, standby)
	if standby.seated.Load() {
		t.Fatal("a second process took the only seat")
	}
	if _, err := producer.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.err != nil || len(r.recs) != 1 {
		t.Fatalf("standby receive: %d messages, %v", len(r.recs), r.err)
	}
}

// TestWokenReceiverRegistersForTheOthers: a push of one task into a
// process with two receivers waiting wakes one, which takes it; the handle
// registers again for the other at one statement, without a claim, and
// the other sleeps on. (The woken receiver woke the other, which claimed
// in vain and then registered.)
func TestWokenReceiverRegistersForTheOthers(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("rearm-%d", time.Now().UnixNano())
	d, counter := openCounted(t, name, time.Hour)
	producer := openURL(t, newQueueURL(t, "queue="+name))
	ctx := ctxT(t)
	a, b := receiveInBackground(ctx, d), receiveInBackground(ctx, d)
	untilWaiting(t, producer, 1)
	untilIdle(t, d, 2)
	claimsBefore, regsBefore := claims(counter, d), counter.count(d.sql.awaitSeat)
	if _, err := producer.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	var other chan received
	select {
	case r := <-a:
		other = b
		if r.err != nil || len(r.recs) != 1 {
			t.Fatalf("woken receiver: %d messages, %v", len(r.recs), r.err)
		}
	case r := <-b:
		other = a
		if r.err != nil || len(r.recs) != 1 {
			t.Fatalf("woken receiver: %d messages, %v", len(r.recs), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no receiver took the task")
	}
	untilWaiting(t, producer, 1)
	untilIdle(t, d, 1)
	if n := claims(counter, d) - claimsBefore; n != 1 {
		t.Errorf("the process claimed %d times for a push of one task; want once", n)
	}
	if n := counter.count(d.sql.awaitSeat) - regsBefore; n != 1 {
		t.Errorf("the handle registered %d times after the wake-up; want once", n)
	}
	select {
	case r := <-other:
		t.Errorf("the other receiver returned: %d messages, %v", len(r.recs), r.err)
	default:
	}
}

// TestDrainedLookIsOneStatement: after a claim that found the queue
// drained, a look registers the handle and, finding no message visible,
// does not claim: one statement. (It claimed after every registration.)
func TestDrainedLookIsOneStatement(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("drained-look-%d", time.Now().UnixNano())
	d, counter := openCounted(t, name, time.Hour)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Receive(ctx, driver.ReceiveParams{Max: 2, Visibility: time.Minute}); err != nil || len(got) != 1 {
		t.Fatalf("receive: %d messages, %v", len(got), err)
	}
	claimsBefore, regsBefore := claims(counter, d), counter.count(d.sql.awaitSeat)
	waiting, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan received, 1)
	go func() {
		recs, err := d.Receive(waiting, driver.ReceiveParams{Max: 2, Visibility: time.Minute, Wait: time.Hour})
		out <- received{recs, err}
	}()
	untilIdle(t, d, 1)
	if n := counter.count(d.sql.awaitSeat) - regsBefore; n != 1 {
		t.Errorf("%d registrations; want 1", n)
	}
	if n := claims(counter, d) - claimsBefore; n != 0 {
		t.Errorf("%d claims after the registration found nothing visible; want none", n)
	}
	cancel()
	if r := <-out; len(r.recs) != 0 {
		t.Fatalf("receive on a drained queue: %d messages", len(r.recs))
	}
}

// TestResultsChannelOnlyWhileWaitingForRecords: a process that only takes
// work listens on its handle's channel alone; the schema's channel, where
// records are announced, only once it waits for records. (Every process
// listened on the schema's channel, and each records notification
// signalled all of them.)
func TestResultsChannelOnlyWhileWaitingForRecords(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	d := openURL(t, raw)
	ctx := ctxT(t)
	leaveWaiting(t, d, d, 1)
	if got := listeningChannels(t, d); !slices.Equal(got, []string{wakePrefix + d.handle}) {
		t.Fatalf("a receiving process listens on %v; want its handle's channel alone", got)
	}
	if err := d.WaitResults(ctx, []string{"none"}, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := []string{d.channel(), wakePrefix + d.handle}
	slices.Sort(want)
	if got := listeningChannels(t, d); !slices.Equal(got, want) {
		t.Fatalf("after a wait for records it listens on %v; want %v", got, want)
	}
}

// TestStandbySleepsLongerWhileTasksRun: a process in standby whose look
// found messages leased or delayed sleeps as on an empty queue (poll
// doubled for each empty look in a row, up to maxStandbySleep), up to when
// the next comes due; one holding a seat looks every poll.
func TestStandbySleepsLongerWhileTasksRun(t *testing.T) {
	d := &Driver{cfg: &config{poll: time.Second}}
	d.listening.Store(true)
	d.quiet.Store(2)
	if got := d.sleepFor(time.Hour, time.Minute, 0, 0); got != time.Second {
		t.Errorf("not in standby: sleeps %s; want the poll, 1s", got)
	}
	d.seatsFull.Store(true)
	if got := d.sleepFor(time.Hour, time.Minute, 0, 0); got != 4*time.Second {
		t.Errorf("in standby after 2 empty looks: sleeps %s; want 4s", got)
	}
	if got := d.sleepFor(time.Hour, 3*time.Second, 0, 0); got != 3*time.Second {
		t.Errorf("in standby, the next message due in 3s: sleeps %s; want 3s", got)
	}
	d.quiet.Store(10)
	if got := d.sleepFor(time.Hour, -1, 0, 0); got != maxStandbySleep {
		t.Errorf("in standby after 10 empty looks: sleeps %s; want %s", got, maxStandbySleep)
	}
}

// TestStandbyClaimsReadyBehindLeased: a process in standby claims a ready
// message that comes after more than a thousand leased ones. (The
// registration's look reads at most 1,000 messages; it found only leased
// ones, and the receiver, claiming only when the look saw a message
// visible, never claimed.)
func TestStandbyClaimsReadyBehindLeased(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=200ms")
	owner, standby := openURL(t, raw), openURL(t, raw)
	standby.listeners = 0 // every seat taken
	ctx := ctxT(t)
	const leased = 1100
	msgs := make([]*driver.Message, leased)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("m%04d", i))
	}
	if _, err := owner.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < leased; {
		r, err := owner.Receive(ctx, driver.ReceiveParams{Max: 100, Visibility: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		got += len(r)
	}
	// The standby process finds nothing and looks for a seat in vain.
	if r, err := standby.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Hour, Wait: 300 * time.Millisecond}); err != nil || len(r) != 0 {
		t.Fatalf("receive with every message leased: %d messages, %v", len(r), err)
	}
	if !standby.drained.Load() || standby.seated.Load() {
		t.Fatalf("standby process: drained %v, seated %v; want drained and without a seat", standby.drained.Load(), standby.seated.Load())
	}
	if _, err := owner.Push(ctx, []*driver.Message{msg("zz-late")}); err != nil {
		t.Fatal(err)
	}
	r, err := standby.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Hour, Wait: 8 * time.Second})
	if err != nil || len(r) != 1 || r[0].ID != "zz-late" {
		t.Fatalf("standby receive with a message ready behind %d leased: %d messages, %v; want zz-late", leased, len(r), err)
	}
}

// TestRegistrationGivenUpIsUnregisteredAtClose: a registration whose
// caller gave up while the LISTEN connection was busy still commits; Close
// deletes its waiting row and its seat. (The driver had not marked the
// handle as having waited, and Close left both rows behind.)
func TestRegistrationGivenUpIsUnregisteredAtClose(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	other := openURL(t, newQueueURL(t))
	ctx := ctxT(t)
	d.startListener()
	for !d.listening.Load() {
		time.Sleep(time.Millisecond)
	}
	busy := make(chan error, 1)
	go func() {
		busy <- d.onListener(ctx, func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `SELECT pg_sleep(0.3)`)
			return err
		})
	}()
	time.Sleep(20 * time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := d.register(short); err == nil {
		t.Fatal("register returned before the busy LISTEN connection ran it; want its context's error")
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	schema := pgx.Identifier{d.cfg.schema}.Sanitize()
	rows := func() (n int) {
		t.Helper()
		err := other.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+schema+`.seats WHERE queue = $1 AND handle = $2)
			+ (SELECT count(*) FROM `+schema+`.waiters WHERE queue = $1 AND handle = $2)`, d.cfg.queue, d.handle).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for rows() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if rows() == 0 {
		t.Fatal("the given-up registration never committed; the check needs it to")
	}
	d.Close()
	if n := rows(); n != 0 {
		t.Fatalf("after Close: %d seat and waiting rows of the closed handle; want 0", n)
	}
}

// TestReconnectForgetsTheLostSessionsRegistration: a process whose LISTEN
// connection broke while its handle was registered, and which no receiver
// of its own registers again, leaves no waiting row behind: a push then
// wakes the handle that does wait, in another process. (The stale row,
// oldest, took the wake-up on a channel nothing listened on.)
func TestReconnectForgetsTheLostSessionsRegistration(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	d, other, producer := openURL(t, raw), openURL(t, raw), openURL(t, raw)
	ctx := ctxT(t)
	if r, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 200 * time.Millisecond}); err != nil || len(r) != 0 {
		t.Fatalf("receive on an empty queue: %d messages, %v", len(r), err)
	}
	if hs := waitingHandles(t, producer); !slices.Contains(hs, d.handle) {
		t.Fatalf("waiting handles %v; want %s's among them", hs, d.handle)
	}
	var pid int32
	if err := d.onListener(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := producer.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for slices.Contains(waitingHandles(t, producer), d.handle) {
		if time.Now().After(deadline) {
			t.Fatal("the reconnected process left its lost session's waiting row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := receiveInBackground(ctx, other)
	untilTried(t, other)
	if _, err := producer.Push(ctx, []*driver.Message{msg("m")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-out:
		if r.err != nil || len(r.recs) != 1 {
			t.Fatalf("the waiting process received %d messages, %v; want 1", len(r.recs), r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the push did not wake the handle that waits")
	}
}
