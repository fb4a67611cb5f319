package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/wakeset"
)

// minSleep keeps a receiver from spinning when a message is visible but
// locked by a concurrent claim (SKIP LOCKED passed it over), so that the
// next visibility time is already past.
const minSleep = time.Millisecond

// maxStandbySleep caps the sleep of a receiver in standby (seats.go): more
// tasks than the seated processes take at once (a burst into a fleet of
// narrow workers) wait for the looks of the processes in standby, which no
// push wakes.
const maxStandbySleep = 4 * time.Second

// keyedRecheck caps the back-off of a receiver that finds messages visible
// but claims none on a queue with key policies: they may be held back by a
// rate window, which no settlement frees, or by a cap that a task ending
// in another process frees. As on Redis, it looks again at least this
// often.
const keyedRecheck = 100 * time.Millisecond

// maxListenSleep caps the silent sleep of a receiver on an empty queue
// while LISTEN is up: the sleep starts at poll and doubles with every
// round that no notification ended, since a push wakes it anyway.
const maxListenSleep = 30 * time.Second

// Receive implements driver.Driver. It claims at once; when nothing is
// visible and p.Wait allows, it sleeps until a wake-up, the next message's
// visibility time or the poll interval, whichever comes first, and claims
// again.
//
// A push wakes one waiting handle per task it stored (schema step 12), and
// the listener hands that wake-up to one receiver of this process
// (listen.go), oldest first. A woken receiver whose claim finds messages
// registers the handle again for the others here (passWake), and wakes one
// of them only if the registration finds more visible.
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
	silent := 0                // sleeps in a row that no wake-up ended
	woken := false             // this look follows a wake-up
	var inFlight time.Duration // the pause while pushes kept the handle from registering
	for {
		w := d.wake.Add() // before the claim, so no wake-up slips by
		l, hw, err := d.lookHeldBack(ctx, p, woken)
		if err != nil || len(l.msgs) > 0 {
			d.leave(w)
			if err != nil {
				return nil, wrap(ctx, "receive", err)
			}
			if woken {
				d.passWake()
			}
			d.quiet.Store(0)
			d.checkStats()
			return l.msgs, nil
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			d.leave(w)
			if hw != nil {
				d.heldBack.Leave(hw)
			}
			return nil, nil
		}
		var pause time.Duration // while a push kept the handle from registering
		if l.refused {
			// A push is in flight (perhaps in a long transaction): its
			// messages are visible once it commits.
			inFlight = min(max(2*inFlight, minSleep), d.cfg.poll)
			pause = inFlight
		} else {
			inFlight = 0
		}
		var freed bool
		sleep := d.sleepFor(remaining, l.next, silent, pause)
		if l.frees > 0 {
			// Look just after a full rate window admits again, rather
			// than up to keyedRecheck later.
			sleep = min(sleep, l.frees+minSleep)
		}
		woken, freed, err = d.sleepUntilWoken(ctx, w, hw, sleep)
		if err != nil {
			return nil, err
		}
		silent = d.afterSleep(l, woken, freed, silent)
	}
}

// lookHeldBack is look, with the receiver in heldBack from before its
// claim (so that no slot freed meanwhile slips by) while the queue has key
// policies and the receive waits. It returns the heldBack waiter only
// when the look found messages held back (visible, none claimed), for the
// sleep; otherwise the receiver has left heldBack, and a freed slot's
// wake-up it got went to another.
func (d *Driver) lookHeldBack(ctx context.Context, p driver.ReceiveParams, woken bool) (look, *wakeset.Waiter, error) {
	var hw *wakeset.Waiter
	if p.Wait > 0 && d.keyedPolicies() {
		hw = d.heldBack.Add()
	}
	l, err := d.look(ctx, p, woken)
	if hw != nil && (err != nil || len(l.msgs) > 0 || l.next != 0) {
		d.heldBack.Leave(hw)
		hw = nil
	}
	if hw != nil {
		l.frees = d.rateWindowFrees(ctx)
	}
	return l, hw, err
}

// afterSleep returns how many sleeps in a row no wake-up ended (silent),
// after a sleep that followed look l and that a push's wake-up (woken) or
// a settlement here (freed) may have ended.
func (d *Driver) afterSleep(l look, woken, freed bool, silent int) int {
	switch {
	case woken:
		// A push took the handle out of the waiting ones (or one in this
		// process pushed, or LISTEN reconnected).
		d.quiet.Store(0)
		return 0
	case freed:
		// A settlement here ended leases: a slot may be free.
		return 0
	case l.next < 0 && !d.seated.Load(), l.next > 0 && d.standby():
		d.quiet.Add(1)
		return silent
	default:
		return silent + 1
	}
}

// passWake hands on, to the receivers of this process still waiting, the
// wake-up that a woken receiver took, which took the handle out of the
// waiting ones: the handle registers again, in the background, so that
// the next push wakes a receiver here, and one of them looks only if the
// registration finds a message visible (the push stored more than it woke
// handles for, or another came meanwhile) or could not register. That
// costs one statement where the next receiver's look cost a claim, which
// mostly found nothing, and a registration.
func (d *Driver) passWake() {
	if d.wake.Waiters() == 0 || !d.mustRegister() {
		return
	}
	d.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := d.register(ctx)
		if err != nil || !r.ok || r.next == 0 {
			d.wake.Notify(1)
		}
	})
}

// look is what one look for work found.
type look struct {
	msgs []*driver.Received
	// next is how long until the queue's next message becomes visible
	// (-1: the queue is empty), when msgs is empty.
	next time.Duration
	// refused: a push in flight kept the handle from registering.
	refused bool
	// frees is how long until a full rate window admits again, when
	// messages were held back and one is full (0 otherwise).
	frees time.Duration
}

// look claims up to p.Max messages; when it finds none and the receive
// waits, it makes sure the handle is registered as waiting (with LISTEN
// up, and a seat free: seats.go) and reads when the next message comes
// due.
//
// A push that commits after a registration wakes this handle (schema step
// 12); one that committed before it is visible to the registration's read
// of the next message (which runs once it has registered): the receiver
// claims after a registration only when that read found a message visible
// now. When the last claim found the queue drained, the handle registers
// before it claims, and an empty queue costs the registration alone;
// otherwise it claims first: under a backlog, or after a wake-up (woken),
// the claim finds messages and the handle need not register.
func (d *Driver) look(ctx context.Context, p driver.ReceiveParams, woken bool) (look, error) {
	wait := p.Wait > 0
	var l look
	if wait && !woken && d.drained.Load() && d.mustRegister() {
		r, err := d.register(ctx)
		if err != nil {
			return l, err
		}
		l.next, l.refused = r.next, d.refusedSeat(r)
		if r.next != 0 {
			return l, nil
		}
		return d.claimAfterRegistration(ctx, p, l)
	}
	// Unless the handle must register (which reads when the next message
	// comes due), the claim reads it.
	c, err := d.claimLooking(ctx, p.Max, p.Visibility, wait && !d.mustRegister())
	if err != nil {
		return l, err
	}
	d.drained.Store(len(c.msgs) < p.Max)
	if len(c.msgs) > 0 || !wait {
		l.msgs = c.msgs
		return l, nil
	}
	if c.looked {
		l.next = c.next
		return l, nil
	}
	if d.mustRegister() {
		r, err := d.register(ctx)
		if err != nil {
			return l, err
		}
		l.next, l.refused = r.next, d.refusedSeat(r)
		if r.next == 0 {
			return d.claimAfterRegistration(ctx, p, l)
		}
		return l, nil
	}
	l.next, err = d.nextVisible(ctx)
	return l, err
}

// claimAfterRegistration claims for a receiver whose registration found a
// message visible: a push that committed before it registered, which no
// wake-up announces.
func (d *Driver) claimAfterRegistration(ctx context.Context, p driver.ReceiveParams, l look) (look, error) {
	var err error
	if l.msgs, err = d.claim(ctx, p.Max, p.Visibility); err != nil {
		return l, err
	}
	d.drained.Store(len(l.msgs) < p.Max)
	return l, nil
}

// refusedSeat reports whether a push in flight kept the handle from
// registering: the receiver then looks again shortly, since no push can
// wake it. A process in standby, refused, goes on polling: the processes
// that hold the seats look for the push.
func (d *Driver) refusedSeat(r registration) bool { return !r.ok && !d.standby() }

// standby reports whether this process's receivers poll in reserve: LISTEN
// is up, but the queue's wake-up seats were all taken when the handle last
// tried for one (seats.go), so no push wakes them.
func (d *Driver) standby() bool { return d.listening.Load() && d.seatsFull.Load() }

// mustRegister reports whether a receiver that found nothing must register
// the handle as waiting before it sleeps: LISTEN is up (a wake-up can
// reach it) and the handle is not registered.
func (d *Driver) mustRegister() bool {
	return d.listening.Load() && !d.registered.Load()
}

// register puts this handle among the waiting ones (schema step 12) if it
// holds or finds a seat (seats.go), and reads when the next message comes
// due. The receivers of this process register one at a time: one that
// waited for another's registration takes its result.
func (d *Driver) register(ctx context.Context) (registration, error) {
	if d.beforeAwait != nil {
		d.beforeAwait()
	}
	gen := d.regGen.Load()
	d.regMu.Lock()
	defer d.regMu.Unlock()
	if d.regGen.Load() != gen && d.registered.Load() {
		return d.regLast, nil
	}
	woken := d.wakeGen.Load()
	// Set before the statement: one that commits after its caller gave up
	// still leaves rows that Close must delete.
	d.waited.Store(true)
	r, err := d.await(ctx)
	if errors.Is(err, errNoListener) {
		// LISTEN went down meanwhile: the receiver polls.
		return registration{next: 0}, nil
	}
	if err != nil {
		return r, err
	}
	if r.ok {
		d.seated.Store(r.seated)
		d.seatsFull.Store(!r.seated)
	}
	if r.seated {
		d.registered.Store(true)
		if d.wakeGen.Load() != woken {
			// A wake-up on the handle's channel came meanwhile: it may
			// have taken this registration out already.
			d.registered.Store(false)
		}
	}
	d.regLast = r
	d.regGen.Add(1)
	return r, nil
}

// leave takes a receiver's waiter out of the set; a wake-up it got and no
// receiver here can take is passed on to another handle.
func (d *Driver) leave(w *wakeset.Waiter) {
	if d.wake.Leave(w) {
		d.passOn()
	}
}

// sleepFor is how long a receiver that found nothing sleeps at most: until
// its wait ends, the next message's visibility (next, negative for an empty
// queue) or the poll, whichever comes first. Only an empty queue lengthens
// the sleep (idleSleep): its next message comes with a wake-up, while one
// whose messages are leased or delayed is looked at every poll. A message
// visible that the claim did not get (next 0) is held by a concurrent
// claim, or left visible by its key's cap, or lies past the 1,000
// messages a registration reads (seats.go): the receiver looks again after
// minSleep, doubled for every sleep in a row that no wake-up ended
// (silent), up to the poll (keyedRecheck under key policies; Receive
// looks sooner when a full rate window frees sooner: look.frees), so that
// it does not spin while such claims keep coming or the keys stay full. A
// settlement here that frees a cap's slot wakes a receiver of this process
// (settle.go). A pause while pushes kept the handle from registering
// shortens it.
func (d *Driver) sleepFor(remaining, next time.Duration, silent int, pause time.Duration) time.Duration {
	sleep := min(remaining, d.cfg.poll)
	switch {
	case next < 0:
		sleep = min(remaining, d.idleSleep(silent))
	case next == 0:
		sleep = min(sleep, minSleep<<min(silent, 16))
		if d.keyedPolicies() {
			sleep = min(sleep, d.keyedRecheck)
		}
	case d.standby():
		// Other processes hold the queue's seats and look every poll
		// while messages are leased or delayed: this one backs off as
		// on an empty queue, but wakes when the next one comes due.
		sleep = max(min(remaining, d.idleSleep(silent), next), minSleep)
	default:
		sleep = max(min(sleep, next), minSleep)
	}
	if pause > 0 {
		sleep = min(sleep, pause)
	}
	return sleep
}

// sleepUntilWoken waits for w to be woken (woken), or hw (nil: none) by a
// settlement of this process that ended leases (freed), for up to dur, or
// for the driver's close or ctx's end (then an error). Unless w was woken,
// it has left its set; hw has left its set in any case.
func (d *Driver) sleepUntilWoken(ctx context.Context, w, hw *wakeset.Waiter, dur time.Duration) (woken, freed bool, err error) {
	timer := time.NewTimer(dur)
	defer timer.Stop()
	d.idle.Add(1)
	defer d.idle.Add(-1)
	var held <-chan struct{}
	if hw != nil {
		held = hw.C()
	}
	select {
	case <-w.C():
		woken = true
	case <-held:
		freed = true
	case <-timer.C:
	case <-d.closing.Done():
	case <-ctx.Done():
	}
	if hw != nil && !freed {
		d.heldBack.Leave(hw) // a freed slot's wake-up that came meanwhile goes to another
	}
	if !woken {
		select {
		case <-w.C():
			woken = true // a push's too: the claim takes it as one
		default:
		}
	}
	if woken {
		return true, false, nil
	}
	d.leave(w)
	if err := d.closing.Err(); err != nil {
		return false, false, err
	}
	if err := ctx.Err(); err != nil {
		return false, false, wrap(ctx, "receive", err)
	}
	return false, freed, nil
}

// idleSleep is how long a receiver that found the queue empty sleeps at
// most without a notification: poll doubled, up to maxListenSleep, for
// each sleep in a row that no notification ended (silent, while the handle
// holds a wake-up seat: a push wakes it), or, without one (the queue's
// seats are taken, listen=false, pgbouncer=true), for each look in a row
// by any of the driver's receivers that found the queue empty (quiet, and
// in standby up to maxStandbySleep only), so that an idle worker looks
// less and less often across its receives, as the worker's own back-off
// means it to (through PgBouncer an idle worker claimed once per poll
// whatever its --max-poll). There a message pushed into a queue idle for
// a while waits for the next look, up to maxListenSleep (or the caller's
// wait); a look that finds one sets the sleeps back to poll.
func (d *Driver) idleSleep(silent int) time.Duration {
	sleep := d.cfg.poll
	limit := maxListenSleep
	if !d.seated.Load() {
		silent = int(d.quiet.Load())
	}
	if d.standby() {
		limit = maxStandbySleep
	}
	for range silent {
		if sleep >= limit/2 {
			return max(limit, d.cfg.poll)
		}
		sleep *= 2
	}
	return sleep
}

// claimed is what a claim found: the messages, in claim order, and for a
// claim that also looked when the next message comes due (look) and took
// nothing, that time (looked).
type claimed struct {
	msgs   []*driver.Received
	next   time.Duration
	looked bool
}

// claim runs the claim statement once and returns the rows in claim order.
func (d *Driver) claim(ctx context.Context, max int, visibility time.Duration) ([]*driver.Received, error) {
	c, err := d.claimLooking(ctx, max, visibility, false)
	return c.msgs, err
}

// claimLooking is claim. With look, and without key policies, it runs
// claimNext: a claim that takes nothing reads nextVisible's answer in the
// same round trip.
func (d *Driver) claimLooking(ctx context.Context, max int, visibility time.Duration, look bool) (claimed, error) {
	// The lease's expiry is reckoned on this machine's clock from before the
	// request, so it is never later than the database's own (whose clock
	// may differ): a worker stops trusting its lease early, never late.
	expiry := time.Now().Add(visibility)
	claimSQL, err := d.claimSQL(ctx)
	if err != nil {
		return claimed{}, err
	}
	look = look && claimSQL == d.sql.claim
	if look {
		claimSQL = d.sql.claimNext
	}
	rows, err := d.pool.Query(ctx, claimSQL, d.cfg.queue, max, micros(visibility))
	if err != nil {
		return claimed{}, err
	}
	defer rows.Close()
	var res claimed
	type claimedRow struct {
		r        *driver.Received
		id       int64
		priority int32
	}
	var out []claimedRow
	var corrupt []driver.DeadLetterParams
	// One set of scan targets for every row: the row's values are copied
	// out of them (taskIDOf, loadBody, appendLeaseToken) before the next.
	// The byte columns are read in place (DriverBytes), valid until Next.
	var (
		c                  claimedRow
		deliveries         int32
		enqueued           pgtype.Timestamptz
		key, stored, lease pgtype.DriverBytes
		traceParent, group string
		token              []byte
	)
	dest := []any{&c.id, &key, &stored, &deliveries, &enqueued, &lease, &c.priority, &traceParent, &group, nil}
	if !look {
		dest = dest[:9] // claimNext's tenth column is the look's
	}
	for rows.Next() {
		if look && rows.RawValues()[0] == nil {
			// claimNext's row after a claim that took nothing.
			var us *int64
			if err := rows.Scan(nil, nil, nil, nil, nil, nil, nil, nil, nil, &us); err != nil {
				return claimed{}, err
			}
			res.next, res.looked = nextOf(us), true
			continue
		}
		if err := rows.Scan(dest...); err != nil {
			return claimed{}, err
		}
		r := &driver.Received{Lease: driver.Lease{Expiry: expiry}, TraceParent: traceParent, Group: group}
		r.ID = taskIDOf(key)
		var bodyOK bool
		r.Body, bodyOK = loadBodyCopy(stored, r.ID)
		token = appendLeaseToken(token[:0], lease, c.priority)
		r.Lease.Token = string(token)
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
		return claimed{}, err
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
	res.msgs = make([]*driver.Received, len(out))
	for i, c := range out {
		res.msgs[i] = c.r
	}
	return res, nil
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
	return nextOf(us), nil
}

// nextOf is nextVisible's answer from the microseconds the statement
// read (nil: the queue is empty).
func nextOf(us *int64) time.Duration {
	if us == nil {
		return -1
	}
	return max(time.Duration(*us)*time.Microsecond, 0)
}
