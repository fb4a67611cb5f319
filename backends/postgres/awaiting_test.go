package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/settletest"
)

// openCounted opens queue (a name of its own, in the tests' schema) on a
// pool of its own whose statements are counted, with LISTEN up.
func openCounted(t *testing.T, queue string, poll time.Duration) (*Driver, *queryCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testConnString())
	if err != nil {
		t.Fatal(err)
	}
	counter := &queryCounter{n: map[string]int{}}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d, err := New(ctxT(t), pool, Options{Queue: queue, Schema: testSchema, Poll: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Clear(ctx)
		d.Close()
	})
	d.startListener()
	for !d.listening.Load() {
		time.Sleep(time.Millisecond)
	}
	return d, counter
}

// untilIdle waits until n receivers of d sleep.
func untilIdle(t *testing.T, d *Driver, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for d.idle.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d receivers sleep, want %d", d.idle.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWakeUpWakesOneReceiverOfProcess: a push of one task wakes one
// receiver of the process whose handle it wakes, not all of them: that
// one claims, and the other goes on waiting. The woken receiver, having
// found a task, wakes the next (receive.go), which may look too before
// the count is read: at most two claims and a registration's claim.
// (Every receiver of the process claimed.)
func TestWakeUpWakesOneReceiverOfProcess(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("one-receiver-%d", time.Now().UnixNano())
	d, counter := openCounted(t, name, time.Hour)
	producer := openURL(t, newQueueURL(t, "queue="+name))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	a, b := receiveInBackground(ctx, d), receiveInBackground(ctx, d)
	untilWaiting(t, producer, 1)
	untilIdle(t, d, 2)
	before := claims(counter, d)
	if _, err := producer.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	var got received
	var other chan received
	select {
	case got = <-a:
		other = b
	case got = <-b:
		other = a
	case <-time.After(10 * time.Second):
		t.Fatal("no receiver took the task")
	}
	if got.err != nil || len(got.recs) != 1 {
		t.Fatalf("woken receiver: %d messages, %v", len(got.recs), got.err)
	}
	untilIdle(t, d, 1)
	if n := claims(counter, d) - before; n < 1 || n > 3 {
		t.Errorf("a push of one task made the process claim %d times; want 1, and at most 3 with the chained look of the next receiver", n)
	}
	select {
	case r := <-other:
		t.Errorf("the other receiver returned: %d messages, %v", len(r.recs), r.err)
	default:
	}
}

// TestWokenReceiverWakesTheNext: a push of two tasks into a queue where one
// handle waits, with two receivers, wakes that handle once; the receiver
// woken, having found a task, wakes the other, which takes the second.
func TestWokenReceiverWakesTheNext(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("chain-%d", time.Now().UnixNano())
	d, _ := openCounted(t, name, time.Hour)
	producer := openURL(t, newQueueURL(t, "queue="+name))
	ctx := ctxT(t)
	outs := []chan received{receiveInBackground(ctx, d), receiveInBackground(ctx, d)}
	untilWaiting(t, producer, 1)
	untilIdle(t, d, 2)
	if _, err := producer.Push(ctx, []*driver.Message{msg("a"), msg("b")}); err != nil {
		t.Fatal(err)
	}
	for i, out := range outs {
		select {
		case r := <-out:
			if r.err != nil || len(r.recs) != 1 {
				t.Fatalf("receiver %d: %d messages, %v", i, len(r.recs), r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("receiver %d was not woken for the second task", i)
		}
	}
}

// TestRegisteredHandleRegistersOnce: receives that find the queue empty,
// one after the other, register the handle once while no push wakes it
// (each receive registered again), and every one claims, in one statement
// with the look for the next message (claimNext); after a wake-up the
// handle registers again.
func TestRegisteredHandleRegistersOnce(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("register-once-%d", time.Now().UnixNano())
	d, counter := openCounted(t, name, time.Hour)
	producer := openURL(t, newQueueURL(t, "queue="+name))
	ctx := ctxT(t)
	const receives = 5
	for range receives {
		if got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 20 * time.Millisecond}); err != nil || len(got) != 0 {
			t.Fatalf("Receive on an empty queue: %d messages, %v", len(got), err)
		}
	}
	if n := counter.count(d.sql.awaitSeat); n != 1 {
		t.Errorf("%d empty receives registered the handle %d times; want once", receives, n)
	}
	if n := claims(counter, d); n < receives {
		t.Errorf("%d empty receives claimed %d times; want at least once each", receives, n)
	}
	// Each empty look is one statement: the registration, or else the
	// claim, reads when the next message comes due.
	if n := counter.count(d.sql.nextVisible); n != 0 {
		t.Errorf("%d empty receives looked for the next visible message %d times apart from their claims; want none", receives, n)
	}
	out := receiveInBackground(ctx, d)
	untilIdle(t, d, 1)
	if _, err := producer.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.err != nil || len(r.recs) != 1 {
		t.Fatalf("receive: %d messages, %v", len(r.recs), r.err)
	}
	if got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 20 * time.Millisecond}); err != nil || len(got) != 0 {
		t.Fatalf("Receive on an empty queue: %d messages, %v", len(got), err)
	}
	if n := counter.count(d.sql.awaitSeat); n != 2 {
		t.Errorf("after the wake-up took the handle out, %d registrations in all; want 2", n)
	}
	untilWaiting(t, producer, 1)
}

// resultsNotifications counts the records notifications of d's queue that
// reach a connection listening on the schema's channel, within quiet.
func resultsNotifications(t *testing.T, conn *pgx.Conn, d *Driver, quiet time.Duration) int {
	t.Helper()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		note, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			return n
		}
		if note.Payload == d.resultsPayload() {
			n++
		}
	}
}

// TestRecordsNotifyOnlyWhileAwaited: settlements that store records send
// the records notification (which Postgres signals to every listening
// backend) only while a process waits for records of the queue; one
// waiting is still woken. (Every settlement with records notified.)
func TestRecordsNotifyOnlyWhileAwaited(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	worker, waiter := openURL(t, raw), openURL(t, raw)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, testConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{worker.channel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Push(ctx, []*driver.Message{msg("a"), msg("b")}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, worker, 2, time.Minute)
	complete := func(r *driver.Received) {
		t.Helper()
		if errs := worker.Complete(ctx, settletest.WithResults([]driver.Lease{r.Lease}, []*driver.ResultRecord{rec(r.ID, driver.ResultSucceeded, time.Hour)})); errs != nil {
			t.Fatal(errs)
		}
	}
	complete(got[0])
	if n := resultsNotifications(t, conn, worker, 300*time.Millisecond); n != 0 {
		t.Errorf("a settlement with a record, nobody waiting for records, sent %d records notifications; want none", n)
	}

	waiter.startListener()
	for !waiter.listening.Load() {
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- waiter.WaitResults(ctx, []string{got[1].ID}, time.Hour) }()
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{testSchema}.Sanitize()+`.result_waiters WHERE queue = $1`, worker.cfg.queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	complete(got[1])
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a settlement with a record did not wake the process waiting for it")
	}
	if n := resultsNotifications(t, conn, worker, 300*time.Millisecond); n != 1 {
		t.Errorf("a settlement with a record, a process waiting, sent %d records notifications; want 1", n)
	}
}

// TestWaitResultsBesideSettlementInFlight: a waiter that registers while a
// statement storing records is in flight (it took the records lock and
// found nobody waiting, so it will not notify) does not sleep past the
// record: it reads the records again once that commits. The waiter's poll
// is an hour.
func TestWaitResultsBesideSettlementInFlight(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "poll=1h")
	settler, waiter := openURL(t, raw), openURL(t, raw)
	ctx := ctxT(t)
	waiter.startListener()
	for !waiter.listening.Load() {
		time.Sleep(time.Millisecond)
	}
	tx, err := settler.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	s := pgx.Identifier{testSchema}.Sanitize()
	var awaited bool
	if err := tx.QueryRow(ctx, `SELECT `+s+`.results_awaited($1)`, settler.cfg.queue).Scan(&awaited); err != nil || awaited {
		t.Fatalf("results_awaited: %v, %v; want false", awaited, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s+`.results (queue, task_id, state, updated_at, expires_at, data) VALUES ($1, 'r', 'succeeded', now(), now() + interval '1 hour', '')`, settler.cfg.queue); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for {
			if err := waiter.WaitResults(ctx, []string{"r"}, time.Hour); err != nil {
				done <- err
				return
			}
			if recs, err := waiter.GetResults(ctx, []string{"r"}); err != nil || recs[0] != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // the waiter meets the statement in flight
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter slept past a record stored by a statement in flight as it registered")
	}
}

// TestListedPoliciesServeClaims: the policies a worker lists (it rereads
// its pauses every second or two) serve its claims too, which read them
// again only after policyTTL; a policy set here meanwhile still counts at
// once. (Claims read them again.)
func TestListedPoliciesServeClaims(t *testing.T) {
	t.Parallel()
	d, counter := openCounted(t, fmt.Sprintf("listed-policies-%d", time.Now().UnixNano()), time.Hour)
	ctx := ctxT(t)
	if _, err := d.ListPolicies(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if n := counter.count(d.psql.list); n != 1 {
		t.Errorf("a list of the policies and a claim read them %d times; want once", n)
	}
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b")}); err == nil {
		t.Error("a push of two tasks past a max-depth of 1 set just before succeeded")
	}
}
