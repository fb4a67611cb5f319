package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// broadcaster wakes every goroutine waiting for work at once. A waiter takes
// the current channel before it looks for work and waits on it afterwards, so
// a wake-up between the two is never missed.
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

// sendNotify sends a trailing notification on a pooled connection.
func (d *Driver) sendNotify() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.pool.Exec(ctx, d.sql.notify, d.channel(), d.cfg.queue); err != nil && !d.closing.Closed() {
		// Receivers still find the message by polling.
		d.log.Debug("jobq postgres: notify failed; idle receivers will find the work by polling", "err", err)
	}
	d.wake.fire()
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
	d.listening.Store(true)
	defer d.listening.Store(false)
	d.wake.fire()
	d.resultWake.fire()
	results := d.resultsPayload()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Payload {
		case d.cfg.queue:
			d.wake.fire()
		case results:
			d.resultWake.fire()
		}
	}
}
