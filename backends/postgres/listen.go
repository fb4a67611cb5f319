package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// broadcaster wakes every goroutine waiting for records at once. A waiter
// takes the current channel before it looks for records and waits on it
// afterwards, so a wake-up between the two is never missed.
type broadcaster struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcaster() broadcaster { return broadcaster{ch: make(chan struct{})} }

// wait returns a channel that is closed at the next fire.
func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// fire wakes every current waiter.
func (b *broadcaster) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}

// wakePrefix begins the channel of every waiting handle: the handle's
// channel is wakePrefix followed by its handle (schema step 12's wake
// notifies it). 31 characters in all, within the 63 a channel name may
// have.
const wakePrefix = "jobq.w."

// newHandle returns a handle: 24 random hex digits, so that no two
// processes' handles meet, whatever their schemas.
func newHandle() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails on Linux, macOS or Windows
	return hex.EncodeToString(b[:])
}

// sendNotify sends a trailing wake-up on a pooled connection: it wakes one
// waiting handle (a push's own wake-up wakes one per message it stored).
func (d *Driver) sendNotify() { d.sendWake(1) }

// sendWake wakes up to n waiting handles of other processes, and the
// receivers of this one.
func (d *Driver) sendWake(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.pool.Exec(ctx, d.sql.wake, d.cfg.queue, n, wakePrefix, d.handle); err != nil && !d.closing.Closed() {
		// Receivers still find the message by polling.
		d.log.Debug("jobq postgres: wake-up failed; idle receivers will find the work by polling", "err", err)
	}
	d.wake.Notify(-1)
}

// passOn wakes another process's waiting handle, in the background, for a
// wake-up this handle got with no receiver waiting: the push took this
// handle out of the waiting ones to wake it, and the message must not wait
// for another handle's next poll.
func (d *Driver) passOn() {
	d.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := d.pool.Exec(ctx, d.sql.wake, d.cfg.queue, 1, wakePrefix, d.handle); err != nil && !d.closing.Closed() {
			d.log.Debug("jobq postgres: could not pass a wake-up on; another receiver finds the work at its next poll", "err", err)
		}
	})
}

// registration is what registering this handle as waiting found.
type registration struct {
	ok bool // the statement ran (false: a push in flight kept it from registering)
	// seated: the handle is registered, and its process LISTENs on the
	// handle's channel (false: the queue's seats were taken, and the
	// process does not listen).
	seated bool
	// next is how long until the queue's next message becomes visible,
	// -1 when the queue is empty (see nextVisible).
	next time.Duration
}

// await registers this handle as waiting if a seat is free, so that the
// next push wakes it, and looks when the next message comes due (schema
// step 19, seats.go). It runs on the LISTEN connection, which listens on
// the handle's channel while the handle holds a seat. It registers
// nothing while a push of the queue is in flight: the caller looks again
// shortly.
//
// The statement writes into a registration of its own, read only once it
// reported done: a caller whose ctx ends first returns while the LISTEN
// session may still run it.
func (d *Driver) await(ctx context.Context) (registration, error) {
	r := new(registration)
	err := d.onListener(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		var us *int64
		if err := conn.QueryRow(ctx, d.sql.awaitSeat, d.cfg.queue, d.handle, d.listeners, wakePrefix, seatHold.Seconds()).Scan(&r.ok, &r.seated, &us); err != nil {
			return err
		}
		r.next = nextOf(us)
		return nil
	})
	if err != nil {
		return registration{}, err
	}
	return *r, nil
}

// errNoListener: the LISTEN connection is down (reconnecting).
var errNoListener = errors.New("postgres: the LISTEN connection is down")

// listenCall is a statement to run on the LISTEN connection between two
// of its waits for notifications.
type listenCall struct {
	fn   func(ctx context.Context, conn *pgx.Conn) error
	done chan error // buffered: the caller may have given up
}

// listenLine hands statements to the LISTEN session (listenSession),
// which runs them on its connection between waits.
type listenLine struct {
	mu    sync.Mutex
	live  bool // a session holds the connection
	calls []listenCall
	// interrupt ends the session's current wait; nil while it is not
	// waiting.
	interrupt context.CancelFunc
}

// onListener runs fn on the LISTEN connection and returns its error, or
// errNoListener when no session is up. fn runs under the session's own
// context (with a timeout), not ctx: a statement cut off halfway would
// cost the connection; a caller whose ctx ends stops waiting for it.
func (d *Driver) onListener(ctx context.Context, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	c := listenCall{fn: fn, done: make(chan error, 1)}
	l := &d.line
	l.mu.Lock()
	if !l.live {
		l.mu.Unlock()
		return errNoListener
	}
	l.calls = append(l.calls, c)
	if l.interrupt != nil {
		l.interrupt()
	}
	l.mu.Unlock()
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closing.Done():
		return d.closing.Err()
	}
}

// runCalls runs the statements handed to the session, and returns the
// first error (the connection is then given up, and the calls not run
// are told errNoListener). It reports, when there were none, a context
// that the next call cancels, for the session's wait.
func (l *listenLine) runCalls(ctx context.Context, conn *pgx.Conn) (context.Context, context.CancelFunc, error) {
	for {
		l.mu.Lock()
		calls := l.calls
		l.calls = nil
		if len(calls) == 0 {
			wait, cancel := context.WithCancel(ctx)
			l.interrupt = cancel
			l.mu.Unlock()
			return wait, cancel, nil
		}
		l.mu.Unlock()
		for i, c := range calls {
			callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.fn(callCtx, conn)
			cancel()
			c.done <- err
			if err != nil && conn.IsClosed() {
				for _, rest := range calls[i+1:] {
					rest.done <- errNoListener
				}
				return nil, nil, err
			}
		}
	}
}

// stopWaiting marks the end of the session's wait.
func (l *listenLine) stopWaiting() {
	l.mu.Lock()
	l.interrupt = nil
	l.mu.Unlock()
}

// setLive opens or closes the line; closing it tells the calls left
// that no session will run them.
func (l *listenLine) setLive(live bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live = live
	if !live {
		for _, c := range l.calls {
			c.done <- errNoListener
		}
		l.calls = nil
		l.interrupt = nil
	}
}

// listenResults makes the LISTEN connection listen on the schema's
// channel, where settlements announce records (results.go), for the rest
// of its session. Only a process that waits for records listens there.
func (d *Driver) listenResults(ctx context.Context) error {
	if d.resultsListening.Load() {
		return nil
	}
	return d.onListener(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.channel()}.Sanitize()); err != nil {
			return err
		}
		d.resultsListening.Store(true)
		return nil
	})
}

// forgetWaitingSQL deletes the waiting row of a handle ($2) of queue $1,
// unless a push's wake-up holds it (and is deleting it): a push in a long
// transaction must not hold up the caller.
func (d *Driver) forgetWaitingSQL() string {
	t := pgx.Identifier{d.cfg.schema}.Sanitize() + `.waiters`
	return `DELETE FROM ` + t + ` WHERE ctid IN (SELECT ctid FROM ` + t + ` WHERE queue = $1 AND handle = $2 FOR UPDATE SKIP LOCKED)`
}

// unregister takes this handle out of the waiting ones, for work and for
// records, so that no push wakes it in vain (best effort: a push that does
// wakes another in its place only at that one's next poll) and no
// settlement notifies for it.
func (d *Driver) unregister() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s := pgx.Identifier{d.cfg.schema}.Sanitize()
	if d.waited.Load() {
		_, _ = d.pool.Exec(ctx, d.forgetWaitingSQL(), d.cfg.queue, d.handle)
		_, _ = d.pool.Exec(ctx, `DELETE FROM `+s+`.seats WHERE queue = $1 AND handle = $2`, d.cfg.queue, d.handle)
	}
	if d.resultsWaited.Load() {
		_, _ = d.pool.Exec(ctx, `DELETE FROM `+s+`.result_waiters WHERE queue = $1 AND handle = $2`, d.cfg.queue, d.handle)
	}
}

// startListener starts, once, the goroutine that LISTENs on the schema's
// channel and wakes local receivers for this queue's notifications. With
// NoListen it does nothing: receivers poll.
func (d *Driver) startListener() {
	if d.cfg.noListen {
		return
	}
	d.listenOnce.Do(func() { d.spawn(d.listen) })
}

// listen holds one dedicated connection in LISTEN and reconnects with
// backoff when it breaks (server restart, failover). After every (re)connect
// it wakes the receivers, because notifications sent while it was away are
// lost.
func (d *Driver) listen() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-d.closing.Done()
		cancel()
	}()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := d.listenSession(ctx)
		if time.Since(started) > 10*time.Second {
			backoff = 50 * time.Millisecond // it worked for a while: this is a new outage
		}
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("jobq postgres: LISTEN connection lost; reconnecting (receivers poll meanwhile)",
			"retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listenSession runs one LISTEN session until its connection fails. The
// connection comes from the pool, so that the pool's hooks and dialer (a
// BeforeConnect that fetches a token, say) apply, and is then taken out of
// it: the pool's size for queries is unchanged.
func (d *Driver) listenSession(ctx context.Context) error {
	pc, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	// The connection is idle by design: an idle_session_timeout set for
	// the role or database (Postgres 14 and later) would end it after every
	// quiet spell, each time a reconnect and a warning. Off for this
	// session only; a server without the setting refuses it, harmlessly.
	if _, err := conn.Exec(ctx, `SET idle_session_timeout = 0`); err != nil && !undefinedSetting(err) {
		return err
	}
	// Until a receiver takes a seat (await), the connection listens on
	// nothing, and no push signals it. Wake-ups sent while it was away are
	// lost: the handle registers again, and the receivers look again.
	own := wakePrefix + d.handle
	if d.waited.Load() {
		// The handle's waiting row from the lost session would be woken
		// by a push on a channel nothing listens on now, while a handle
		// of another process waits: the handle registers anew.
		if _, err := conn.Exec(ctx, d.forgetWaitingSQL(), d.cfg.queue, d.handle); err != nil {
			return err
		}
	}
	d.wakeGen.Add(1)
	d.registered.Store(false)
	d.seated.Store(false)
	d.seatsFull.Store(false)
	d.resultsListening.Store(false)
	d.line.setLive(true)
	d.listening.Store(true)
	defer func() {
		d.listening.Store(false)
		d.line.setLive(false)
		d.wakeGen.Add(1)
		d.registered.Store(false)
		d.seated.Store(false)
		d.seatsFull.Store(false)
		d.resultsListening.Store(false)
	}()
	d.wake.Notify(-1)
	d.resultWake.fire()
	results := d.resultsPayload()
	for {
		wait, cancel, err := d.line.runCalls(ctx, conn)
		if err != nil {
			return err
		}
		n, err := conn.WaitForNotification(wait)
		d.line.stopWaiting()
		interrupted := wait.Err() != nil
		cancel()
		if err != nil {
			if interrupted && ctx.Err() == nil && !conn.IsClosed() {
				continue // a call came: run it
			}
			return err
		}
		switch {
		case n.Channel == own:
			// A push took this handle out of the waiting ones to wake
			// it: one receiver here claims (and, finding messages, wakes
			// the next: receive.go); with none waiting, another handle
			// must.
			d.wakeGen.Add(1)
			d.registered.Store(false)
			if d.wake.Notify(1) == 0 {
				d.passOn()
			}
		case n.Payload == d.cfg.queue:
			// The schema's channel: pushes of releases before schema
			// step 12 announce there to every process.
			d.wake.Notify(-1)
		case n.Payload == results:
			d.resultWake.fire()
		}
	}
}

// undefinedSetting reports whether err is the server's refusal of a
// setting it does not have (SQLSTATE 42704).
func undefinedSetting(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704"
}
