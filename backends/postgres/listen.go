package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
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

// sendWake wakes up to n waiting handles, and the receivers of this
// process.
func (d *Driver) sendWake(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.pool.Exec(ctx, d.sql.wake, d.cfg.queue, n, wakePrefix); err != nil && !d.closing.Closed() {
		// Receivers still find the message by polling.
		d.log.Debug("jobq postgres: wake-up failed; idle receivers will find the work by polling", "err", err)
	}
	d.wake.Notify(-1)
}

// passOn wakes another waiting handle, in the background, for a wake-up
// this handle got with no receiver waiting: the push took this handle out
// of the waiting ones to wake it, and the message must not wait for
// another handle's next poll.
func (d *Driver) passOn() {
	d.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := d.pool.Exec(ctx, d.sql.wake, d.cfg.queue, 1, wakePrefix); err != nil && !d.closing.Closed() {
			d.log.Debug("jobq postgres: could not pass a wake-up on; another receiver finds the work at its next poll", "err", err)
		}
	})
}

// registration is what registering this handle as waiting found.
type registration struct {
	ok bool // registered (false: a push in flight kept it from registering)
	// next is how long until the queue's next message becomes visible,
	// -1 when the queue is empty (see nextVisible).
	next time.Duration
}

// await registers this handle as waiting, so that the next push wakes it
// (schema steps 12 and 16), and looks when the next message comes due. It
// registers nothing while a push of the queue is in flight: the caller
// looks again shortly.
func (d *Driver) await(ctx context.Context) (registration, error) {
	var r registration
	var us *int64
	if err := d.pool.QueryRow(ctx, d.sql.awaitNext, d.cfg.queue, d.handle).Scan(&r.ok, &us); err != nil {
		return r, err
	}
	r.next = nextOf(us)
	return r, nil
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
		_, _ = d.pool.Exec(ctx, `DELETE FROM `+s+`.waiters WHERE queue = $1 AND handle = $2`, d.cfg.queue, d.handle)
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
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.channel()}.Sanitize()); err != nil {
		return err
	}
	own := wakePrefix + d.handle
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{own}.Sanitize()); err != nil {
		return err
	}
	// Wake-ups sent while it was away are lost: the handle registers
	// again, and the receivers look again.
	d.wakeGen.Add(1)
	d.registered.Store(false)
	d.listening.Store(true)
	defer func() {
		d.listening.Store(false)
		d.wakeGen.Add(1)
		d.registered.Store(false)
	}()
	d.wake.Notify(-1)
	d.resultWake.fire()
	results := d.resultsPayload()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
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
