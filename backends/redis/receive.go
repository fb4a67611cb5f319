package redis

import (
	"context"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
)

// maxIdleWait bounds one silent wait, in case an announcement was lost in a
// way the listener could not notice; an idle receiver claims at most this
// often.
const maxIdleWait = 30 * time.Second

// waitMarkTTL is how long the waiting mark a waiting receiver's empty
// claim sets lasts (P..'waiting', scripts.go): longer than any one wait,
// which ends in another claim that sets it again. Pushes announce only
// while the mark exists, so that a queue whose receivers are all busy
// pays no announcement per push, and its subscribers get none.
const waitMarkTTL = maxIdleWait + 5*time.Second

// Receive implements driver.Driver. When nothing is ready and p.Wait is
// positive, it waits for a pub/sub announcement from a push, or for the
// earliest delayed message or lease to come due, whichever is first.
func (d *Driver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	if err := d.begin(ctx, "receive"); err != nil {
		return nil, err
	}
	n := min(max(p.Max, 1), maxReceiveBatch)
	if p.Visibility <= 0 {
		return nil, driver.Errorf(driver.InvalidArgument, "redis receive on queue %s: visibility %v must be positive", d.queue, p.Visibility)
	}
	vis := ms(p.Visibility)
	deadline := time.Now().Add(p.Wait)
	if p.Wait > 0 {
		if err := d.listen(ctx, d.channel); err != nil {
			return nil, err
		}
	}
	for {
		var w *waiter
		if p.Wait > 0 {
			w = d.wake.add() // before the claim, so no announcement slips by
		}
		recs, nextDue, err := d.claim(ctx, n, vis, p.Wait > 0)
		if err != nil || len(recs) > 0 || p.Wait <= 0 {
			if w != nil {
				d.wake.leave(w)
			}
			return recs, err
		}
		pause := time.Until(deadline)
		if pause <= 0 {
			d.wake.leave(w)
			return nil, nil
		}
		if nextDue > 0 && nextDue < pause {
			pause = nextDue
		}
		pause = min(pause, maxIdleWait)
		t := time.NewTimer(pause)
		select {
		case <-w.ch:
			t.Stop() // woken: claim again, which uses the wake-up
		case <-t.C:
			d.wake.leave(w)
			if !time.Now().Before(deadline) {
				return nil, nil
			}
		case <-ctx.Done():
			t.Stop()
			d.wake.leave(w)
			return nil, d.fail("receive", ctx.Err())
		}
	}
}

// claim runs the claim script once. nextDue is how long until a delayed
// message or an expired lease becomes claimable (0 when nothing is
// waiting or something was claimed). wait says the receiver waits for an
// announcement if it finds nothing: the claim then sets the waiting mark.
func (d *Driver) claim(ctx context.Context, n int, vis int64, wait bool) (recs []*driver.Received, nextDue time.Duration, err error) {
	start := time.Now()
	var cmd *goredis.Cmd
	if wait {
		cmd = d.run(ctx, claimScript, n, vis, ms(waitMarkTTL))
	} else {
		cmd = d.run(ctx, claimScript, n, vis)
	}
	res, err := cmd.Slice()
	if err != nil {
		return nil, 0, d.fail("receive", err)
	}
	if len(res) < 2 {
		return nil, 0, driver.Errorf(driver.Internal, "redis receive on queue %s: claim script returned %d values", d.queue, len(res))
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
	recs = make([]*driver.Received, 0, (len(res)-2)/8)
	for i := 2; i+7 < len(res); i += 8 {
		id := asStr(res[i+3])
		recs = append(recs, &driver.Received{
			ID:            id,
			Body:          storedBody(res[i+4], res[i+7], id),
			DeliveryCount: int(asInt(res[i+2])),
			EnqueuedAt:    fromMs(asInt(res[i+5])),
			TraceParent:   asStr(res[i+6]),
			Lease: driver.Lease{
				MessageID: asStr(res[i]),
				Token:     asStr(res[i+1]),
				Expiry:    expiry,
			},
		})
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
	if err := d.begin(ctx, "subscribe"); err != nil {
		return err
	}
	if d.pubsub == nil {
		ps := d.client.Subscribe(ctx, channel)
		if _, err := ps.Receive(ctx); err != nil {
			_ = ps.Close()
			return d.fail("subscribe", err)
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
				return d.fail("subscribe", err)
			}
			d.confirming[channel] = confirmed
		}
		d.listenMu.Unlock()
		select {
		case <-confirmed:
		case <-ctx.Done():
		case <-d.done:
		}
		d.listenMu.Lock()
		select {
		case <-confirmed:
		default:
			if err := ctx.Err(); err != nil {
				return d.fail("subscribe", err)
			}
			return driver.Errorf(driver.FailedPrecondition, "redis subscribe on queue %s: the queue is closed", d.queue)
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
			if d.closed.Load() {
				return
			}
			select {
			case <-time.After(backoff):
			case <-d.done:
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		switch m := msg.(type) {
		case *goredis.Message:
			if m.Channel == results {
				d.resultWake.announce(m.Payload)
			} else {
				d.announced(m.Payload)
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
				d.wake.notify(-1)
			}
		}
	}
}

// announced acts on one announcement: "n" means n messages became visible
// and wakes up to n waiters; "@ms" means a delayed message comes due in ms
// milliseconds, and wakes one waiter then, since receivers that went idle
// before it was pushed do not know about it.
func (d *Driver) announced(payload string) {
	if after, ok := strings.CutPrefix(payload, "@"); ok {
		ms, err := strconv.ParseInt(after, 10, 64)
		if err != nil || ms < 0 {
			ms = 0
		}
		time.AfterFunc(time.Duration(ms+1)*time.Millisecond, func() { d.wake.notify(1) })
		return
	}
	k, err := strconv.Atoi(payload)
	if err != nil || k < 1 {
		k = 1
	}
	d.wake.notify(k)
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
