package redis

import (
	"context"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/wakeset"
)

// maxIdleWait bounds one silent wait, in case an announcement was lost in a
// way the listener could not notice; an idle receiver claims at most this
// often.
const maxIdleWait = 30 * time.Second

// waitMarkTTL is how long the entry a waiting receiver's empty claim puts
// in P..'waiters' (scripts.go) lasts: longer than any one wait, which ends
// in another claim that puts it back. Pushes wake only the handles in that
// set, each on its own channel, so a queue whose receivers are all busy
// pays no announcement per push, and a push of one task wakes one process
// of an idle fleet rather than all of them.
const waitMarkTTL = maxIdleWait + 5*time.Second

// Receive implements driver.Driver. When nothing is ready and p.Wait is
// positive, it waits to be woken by a push (on the handle's own pub/sub
// channel), or for the earliest delayed message or lease to come due,
// whichever is first.
//
// A push takes the handle out of the waiting set as it wakes it, while
// other receivers of the handle may still wait. So a woken receiver whose
// claim finds messages wakes another waiting receiver of the handle: that
// one's claim finds messages pushed since, or finds nothing and puts the
// handle back, in the same script, so no later push passes it by.
func (d *Driver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	n := min(max(p.Max, 1), maxReceiveBatch)
	if p.Visibility <= 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "redis receive on queue %s: visibility %v must be positive", d.queue, p.Visibility)
	}
	vis := ms(p.Visibility)
	if p.Wait <= 0 {
		recs, _, err := d.claim(ctx, n, vis, false)
		return recs, err
	}
	deadline := time.Now().Add(p.Wait)
	if err := d.listen(ctx, d.ownChannel); err != nil {
		return nil, err
	}
	// Pushes of earlier releases announce here, to every handle.
	if err := d.listen(ctx, d.channel); err != nil {
		return nil, err
	}
	return d.receiveWaiting(ctx, n, vis, deadline)
}

// receiveWaiting is Receive of up to n messages leased for vis
// milliseconds, waiting until deadline while nothing is ready.
func (d *Driver) receiveWaiting(ctx context.Context, n int, vis int64, deadline time.Time) ([]*driver.Received, error) {
	woken := false // this claim follows a wake-up
	for {
		w := d.wake.Add() // before the claim, so no announcement slips by
		recs, nextDue, err := d.claim(ctx, n, vis, true)
		if err != nil || len(recs) > 0 {
			d.leave(w)
			if woken && len(recs) > 0 {
				d.wake.Notify(1)
			}
			return recs, err
		}
		pause := time.Until(deadline)
		if pause <= 0 {
			d.leave(w)
			return nil, nil
		}
		if nextDue > 0 && nextDue < pause {
			pause = nextDue
		}
		var done bool
		if woken, done, err = d.await(ctx, w, min(pause, maxIdleWait), deadline); done {
			return nil, err
		}
	}
}

// await waits up to pause for w to be woken. woken says it was, and the
// receiver claims again, which uses the wake-up; otherwise w has left, and
// done says the receive ends: deadline passed, or ctx ended (err).
func (d *Driver) await(ctx context.Context, w *wakeset.Waiter, pause time.Duration, deadline time.Time) (woken, done bool, err error) {
	t := time.NewTimer(pause)
	select {
	case <-w.C():
		t.Stop()
		return true, false, nil
	case <-t.C:
		d.leave(w)
		return false, !time.Now().Before(deadline), nil
	case <-ctx.Done():
		t.Stop()
		d.leave(w)
		return false, true, d.fail(ctx, "receive", ctx.Err())
	}
}

// leave unregisters a waiter; a wake-up it had and no other receiver of
// this handle could take is passed on to another handle.
func (d *Driver) leave(w *wakeset.Waiter) {
	if d.wake.Leave(w) {
		d.passOn(1)
	}
}

// passOn wakes up to n other waiting handles, for wake-ups this one had no
// waiting receiver for (wakeScript), in the background: a push took this
// handle out of the waiting set to wake it, and the messages it was woken
// for must not wait for another handle's next idle claim.
func (d *Driver) passOn(n int) {
	if n <= 0 {
		return
	}
	d.passMu.Lock()
	defer d.passMu.Unlock()
	if d.closing.Closed() {
		return
	}
	d.passing.Add(1)
	go func() {
		defer d.passing.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.run(ctx, wakeScript, n, d.id).Err(); err != nil && !d.closing.Closed() {
			d.log.Warn("jobq: could not pass on a wake-up; another receiver picks the task up at its next claim", "queue", d.queue, "err", err)
		}
	}()
}

// claim runs the claim script once. nextDue is how long until a delayed
// message or an expired lease becomes claimable (0 when nothing is
// waiting or something was claimed). wait says the receiver waits to be
// woken if it finds nothing: the claim then puts the handle in
// P..'waiters' (claimScript).
func (d *Driver) claim(ctx context.Context, n int, vis int64, wait bool) (recs []*driver.Received, nextDue time.Duration, err error) {
	start := time.Now()
	var cmd *goredis.Cmd
	if wait {
		cmd = d.run(ctx, claimScript, n, vis, ms(waitMarkTTL), d.id)
	} else {
		cmd = d.run(ctx, claimScript, n, vis)
	}
	res, err := cmd.Slice()
	if err != nil {
		return nil, 0, d.fail(ctx, "receive", err)
	}
	if len(res) < 2 {
		return nil, 0, driver.Errorf(errcode.Internal, "redis receive on queue %s: claim script returned %d values", d.queue, len(res))
	}
	now, next := asInt(res[0]), asInt(res[1])
	if len(res) == 2 {
		if next > 0 {
			// One millisecond more, so the wait ends after the due time.
			nextDue = time.Duration(next-now+1) * time.Millisecond
		}
		return nil, nextDue, nil
	}
	// The lease's expiry is measured on this machine's clock from before the
	// call, so it is never later than the server's.
	expiry := start.Add(time.Duration(vis) * time.Millisecond)
	recs = make([]*driver.Received, 0, len(res)-2)
	for _, v := range res[2:] {
		c, ok := parseClaimed(asStr(v))
		if !ok {
			return nil, 0, driver.Errorf(errcode.Internal, "redis receive on queue %s: the claim script's reply holds a message it cannot have written", d.queue)
		}
		recs = append(recs, c.received(expiry))
	}
	return recs, 0, nil
}

// listen subscribes the driver's pub/sub connection to channel (the
// queue's announcements, or its result records'), once per driver and
// channel, and starts the goroutine that relays what arrives. It returns
// once Redis has confirmed the subscription: only then are messages
// delivered.
func (d *Driver) listen(ctx context.Context, channel string) error {
	d.listenMu.Lock()
	defer d.listenMu.Unlock()
	if d.subscribed[channel] {
		return nil
	}
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if d.pubsub == nil {
		ps := d.client.Subscribe(ctx, channel)
		if _, err := ps.Receive(ctx); err != nil {
			_ = ps.Close()
			return d.fail(ctx, "subscribe", err)
		}
		d.pubsub = ps
		d.listenWG.Add(1)
		go d.relay(ps)
	} else {
		// The relay reads the confirmation and closes confirmed; a second
		// caller waits for the same one.
		confirmed, pending := d.confirming[channel]
		if !pending {
			confirmed = make(chan struct{})
			if err := d.pubsub.Subscribe(ctx, channel); err != nil {
				return d.fail(ctx, "subscribe", err)
			}
			d.confirming[channel] = confirmed
		}
		d.listenMu.Unlock()
		select {
		case <-confirmed:
		case <-ctx.Done():
		case <-d.closing.Done():
		}
		d.listenMu.Lock()
		select {
		case <-confirmed:
		default:
			if err := ctx.Err(); err != nil {
				return d.fail(ctx, "subscribe", err)
			}
			return d.closing.Err()
		}
	}
	d.subscribed[channel] = true
	return nil
}

// relay passes announcements to waiting receivers and result waiters until
// Close. go-redis reconnects and resubscribes on its own; a
// resubscription wakes every waiter, because announcements made while
// disconnected are lost.
func (d *Driver) relay(ps *goredis.PubSub) {
	defer d.listenWG.Done()
	const minBackoff, maxBackoff = 50 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	results := d.resultsChannel()
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if d.closing.Closed() {
				return
			}
			select {
			case <-time.After(backoff):
			case <-d.closing.Done():
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		switch m := msg.(type) {
		case *goredis.Message:
			switch m.Channel {
			case results:
				d.resultWake.announce(m.Payload)
			case d.ownChannel:
				d.announced(m.Payload, true)
			default:
				d.announced(m.Payload, false)
			}
		case *goredis.Subscription:
			d.listenMu.Lock()
			if c, ok := d.confirming[m.Channel]; ok && m.Kind == "subscribe" {
				close(c)
				delete(d.confirming, m.Channel)
			}
			d.listenMu.Unlock()
			if m.Channel == results {
				d.resultWake.wakeAll()
			} else {
				d.wake.Notify(-1)
			}
		}
	}
}

// announced acts on one announcement: "n" means n messages became visible
// and wakes up to n waiters; "@ms" means a delayed message comes due in ms
// milliseconds, and wakes one waiter then, since receivers that went idle
// before it was pushed do not know about it. A wake-up on the handle's own
// channel (own) that finds no waiter is passed on: the push that sent it
// woke no other handle for it. One on the channel of earlier releases went
// to every handle.
func (d *Driver) announced(payload string, own bool) {
	if after, ok := strings.CutPrefix(payload, "@"); ok {
		ms, err := strconv.ParseInt(after, 10, 64)
		if err != nil || ms < 0 {
			ms = 0
		}
		time.AfterFunc(time.Duration(ms+1)*time.Millisecond, func() {
			if d.wake.Notify(1) == 0 && own {
				d.passOn(1)
			}
		})
		return
	}
	k, err := strconv.Atoi(payload)
	if err != nil || k < 1 {
		k = 1
	}
	if woke := d.wake.Notify(k); own && woke < k {
		d.passOn(k - woke)
	}
}

// asInt reads an integer reply element.
func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	case float64:
		return int64(x)
	}
	return 0
}

// asStr reads a string reply element.
func asStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case []byte:
		return string(x)
	}
	return ""
}
