package postgres

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// minSleep keeps a receiver from spinning when a message is visible but
// locked by a concurrent claim (SKIP LOCKED passed it over), so that the
// next visibility time is already past.
const minSleep = time.Millisecond

// maxListenSleep caps the silent sleep of a receiver on an empty queue
// while LISTEN is up: the sleep starts at poll and doubles with every
// round that no notification ended, since a push wakes it anyway.
const maxListenSleep = 30 * time.Second

// Receive implements driver.Driver. It claims at once; when nothing is
// visible and p.Wait allows, it sleeps until a push notification, the next
// message's visibility time or the poll interval, whichever comes first, and
// claims again.
func (d *Driver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	if p.Max < 1 {
		p.Max = 1
	}
	if p.Visibility <= 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "postgres receive: visibility %s must be positive", p.Visibility)
	}
	deadline := time.Now().Add(p.Wait)
	if p.Wait > 0 {
		d.startListener()
	}
	silent := 0                // sleeps in a row that no notification ended
	registered := false        // this handle is among the waiting ones
	var inFlight time.Duration // the pause while pushes kept it from registering
	for {
		woken := d.wake.wait()
		msgs, err := d.claim(ctx, p.Max, p.Visibility)
		if err != nil {
			return nil, wrap(ctx, "receive", err)
		}
		if len(msgs) > 0 {
			d.quiet.Store(0)
			d.checkStats()
			return msgs, nil
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return msgs, nil
		}
		var pause time.Duration // while a push kept the handle from registering
		if !registered && d.listening.Load() {
			ok, err := d.register(ctx)
			if err != nil {
				return nil, wrap(ctx, "receive", err)
			}
			if ok {
				registered, inFlight = true, 0
				continue // claim once more: see register
			}
			// A push is in flight (perhaps in a long transaction): its
			// messages are visible once it commits.
			inFlight = min(max(2*inFlight, minSleep), d.cfg.poll)
			pause = inFlight
		}
		next, err := d.nextVisible(ctx)
		if err != nil {
			return nil, wrap(ctx, "receive", err)
		}
		wokenUp, err := d.sleepUntilWoken(ctx, woken, d.sleepFor(remaining, next, silent, pause))
		if err != nil {
			return nil, err
		}
		switch {
		case wokenUp:
			// A push took the handle out of the waiting ones (or one in
			// this process pushed, or LISTEN reconnected).
			silent, registered = 0, false
			d.quiet.Store(0)
		case next < 0 && !d.listening.Load():
			d.quiet.Add(1)
		default:
			silent++
		}
	}
}

// register puts this handle among the waiting ones (schema step 12); the
// caller then claims once more: a push that committed before the
// registration is found by that claim, and one after it wakes this handle.
// It reports false when a push in flight kept it from registering.
func (d *Driver) register(ctx context.Context) (bool, error) {
	if d.beforeAwait != nil {
		d.beforeAwait()
	}
	ok, err := d.await(ctx)
	if ok {
		d.waited.Store(true)
	}
	return ok, err
}

// sleepFor is how long a receiver that found nothing sleeps at most: until
// its wait ends, the next message's visibility (next, negative for an empty
// queue) or the poll, whichever comes first. Only an empty queue lengthens
// the sleep (idleSleep): its next message comes with a wake-up, while one
// whose messages are leased or delayed is looked at every poll. A pause
// while pushes kept the handle from registering shortens it.
func (d *Driver) sleepFor(remaining, next time.Duration, silent int, pause time.Duration) time.Duration {
	sleep := min(remaining, d.cfg.poll)
	if next < 0 {
		sleep = min(remaining, d.idleSleep(silent))
	} else {
		sleep = max(min(sleep, next), minSleep)
	}
	if pause > 0 {
		sleep = min(sleep, pause)
	}
	return sleep
}

// sleepUntilWoken waits for woken, for up to dur, or for the driver's close or ctx's
// end (then an error); it reports whether woken fired.
func (d *Driver) sleepUntilWoken(ctx context.Context, woken <-chan struct{}, dur time.Duration) (bool, error) {
	timer := time.NewTimer(dur)
	defer timer.Stop()
	d.idle.Add(1)
	defer d.idle.Add(-1)
	wokenUp := false
	select {
	case <-woken:
		wokenUp = true
	case <-timer.C:
	case <-d.closing.Done():
	case <-ctx.Done():
	}
	if err := d.closing.Err(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, wrap(ctx, "receive", err)
	}
	return wokenUp, nil
}

// idleSleep is how long a receiver that found the queue empty sleeps at
// most without a notification: poll doubled, up to maxListenSleep, for
// each sleep in a row that no notification ended (silent, while LISTEN is
// up: a push wakes it), or, without LISTEN (listen=false, pgbouncer=true),
// for each look in a row by any of the driver's receivers that found the
// queue empty (quiet), so that an idle worker looks less and less often
// across its receives, as the worker's own back-off means it to (through
// PgBouncer an idle worker claimed once per poll whatever its --max-poll).
// There a message pushed into a queue idle for a while waits for the next
// look, up to maxListenSleep (or the caller's wait); a look that finds
// one sets the sleeps back to poll.
func (d *Driver) idleSleep(silent int) time.Duration {
	sleep := d.cfg.poll
	if !d.listening.Load() {
		silent = int(d.quiet.Load())
	}
	for range silent {
		if sleep >= maxListenSleep/2 {
			return max(maxListenSleep, d.cfg.poll)
		}
		sleep *= 2
	}
	return sleep
}

// claim runs the claim statement once and returns the rows in claim order.
func (d *Driver) claim(ctx context.Context, max int, visibility time.Duration) ([]*driver.Received, error) {
	// The lease's expiry is reckoned on this machine's clock from before the
	// request, so it is never later than the database's own (whose clock
	// may differ): a worker stops trusting its lease early, never late.
	expiry := time.Now().Add(visibility)
	claimSQL, err := d.claimSQL(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, claimSQL, d.cfg.queue, max, micros(visibility))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type claimed struct {
		r        *driver.Received
		id       int64
		priority int32
	}
	var out []claimed
	var corrupt []driver.DeadLetterParams
	for rows.Next() {
		var c claimed
		var deliveries int32
		var enqueued pgtype.Timestamptz
		var key, stored []byte
		r := &driver.Received{Lease: driver.Lease{Expiry: expiry}}
		if err := rows.Scan(&c.id, &key, &stored, &deliveries, &enqueued, &r.Lease.Token, &c.priority, &r.TraceParent, &r.Group); err != nil {
			return nil, err
		}
		r.ID = taskIDOf(key)
		var bodyOK bool
		r.Body, bodyOK = loadBody(stored, r.ID)
		r.Lease.Token = leaseToken(r.Lease.Token, c.priority)
		r.DeliveryCount = int(deliveries)
		r.EnqueuedAt = enqueued.Time
		r.Lease.MessageID = strconv.FormatInt(c.id, 10)
		r.Lease.Private = leasedTask(r.ID)
		if why := claimCorruption(deliveries, enqueued, bodyOK); why != "" {
			corrupt = append(corrupt, driver.DeadLetterParams{Lease: r.Lease, Reason: "corrupt record: " + why})
			continue
		}
		c.r = r
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(corrupt) > 0 {
		d.quarantine(ctx, corrupt)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].priority != out[j].priority {
			return out[i].priority > out[j].priority
		}
		return out[i].id < out[j].id
	})
	msgs := make([]*driver.Received, len(out))
	for i, c := range out {
		msgs[i] = c.r
	}
	return msgs, nil
}

// claimCorruption says what is wrong with a claimed row whose fields no
// jobq wrote (another tool, a hand edit), or "" when nothing is: a delivery
// count the claim could not raise (see nextDelivery), an enqueue time that
// is not a time, a stored body without a header jobq writes.
func claimCorruption(deliveries int32, enqueued pgtype.Timestamptz, bodyOK bool) string {
	switch {
	case !bodyOK:
		return "its stored body (packed_body column) does not begin with a header jobq writes"
	case deliveries < 1 || deliveries == math.MaxInt32:
		return fmt.Sprintf("its delivery count (deliveries column) is %d, outside 0..%d", deliveries-1, math.MaxInt32-1)
	case enqueued.InfinityModifier != pgtype.Finite:
		return fmt.Sprintf("its enqueue time (enqueued_at column) is %s, not a time", enqueued.InfinityModifier)
	}
	return ""
}

// quarantine dead-letters claimed messages whose rows are damaged, so that
// they are neither returned nor claimed again and again. The claim holds
// their leases; if this fails they come back when those expire and are
// quarantined then.
func (d *Driver) quarantine(ctx context.Context, reqs []driver.DeadLetterParams) {
	errs := d.DeadLetter(ctx, reqs)
	for i, r := range reqs {
		if errs != nil && errs[i] != nil {
			d.log.Error("jobq: could not dead-letter a corrupt message; it will be claimed again when its lease expires",
				"message_id", r.Lease.MessageID, "reason", r.Reason, "error", errs[i])
			continue
		}
		d.log.Warn("jobq: corrupt message dead-lettered", "message_id", r.Lease.MessageID, "reason", r.Reason)
	}
}

// nextVisible returns how long until the queue's next invisible message
// becomes visible, or -1 when the queue is empty.
func (d *Driver) nextVisible(ctx context.Context) (time.Duration, error) {
	var us *int64
	if err := d.pool.QueryRow(ctx, d.sql.nextVisible, d.cfg.queue).Scan(&us); err != nil {
		return 0, err
	}
	if us == nil {
		return -1, nil
	}
	return max(time.Duration(*us)*time.Microsecond, 0), nil
}
