package servicebus

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// MinReceiveWait is the shortest time Receive waits for a message: a
// peek-lock receive needs a round trip to the broker, so a Wait below it
// (including zero) is raised to it.
const MinReceiveWait = 200 * time.Millisecond

// held is a Lease's Private part: the SDK's message and the receiver that
// must settle it. settled guards against settling twice, which the SDK
// silently accepts.
type held struct {
	msg       *azservicebus.ReceivedMessage
	recv      *azservicebus.Receiver
	prior     int // deliveries before the message was copied
	uncounted int // of all deliveries, those that must not use up a retry
	settled   atomic.Bool
}

// deliveries is how many times the task was delivered, this time included,
// across the copies requeues made of it.
func (h *held) deliveries() int { return int(h.msg.DeliveryCount) + h.prior }

// Receive implements driver.Driver. The lease is the message's lock, for
// the queue's lock duration whatever p.Visibility says.
func (d *Driver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	const op = "receive"
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	msgs, err := d.receive(ctx, d.recv, d.recvSem, p.Max, p.Wait)
	if err != nil {
		return nil, d.fail(op, err)
	}
	now := time.Now()
	for _, m := range msgs {
		d.clock.observe(m.LockedUntil, now)
	}
	out := make([]*driver.Received, len(msgs))
	for i, m := range msgs {
		h := &held{msg: m, recv: d.recv}
		h.prior, h.uncounted = deliveryProps(m)
		r := &driver.Received{
			ID:                  taskID(m),
			Body:                m.Body,
			DeliveryCount:       h.deliveries(),
			UncountedDeliveries: h.uncounted,
			TraceParent:         traceParent(m),
			Lease:               d.lease(h),
		}
		if m.EnqueuedTime != nil {
			r.EnqueuedAt = d.clock.local(*m.EnqueuedTime)
		}
		out[i] = r
	}
	return out, nil
}

// receive takes up to n messages from r, waiting at most wait
// (at least MinReceiveWait) for the first. The SDK forbids concurrent
// receives on one receiver, so callers queue on sem within the same wait.
// Nothing within the wait is an empty result, not an error.
func (d *Driver) receive(ctx context.Context, r *azservicebus.Receiver, sem chan struct{}, n int, wait time.Duration) ([]*azservicebus.ReceivedMessage, error) {
	wctx, cancel := context.WithTimeout(ctx, max(wait, MinReceiveWait))
	defer cancel()
	select {
	case sem <- struct{}{}:
	case <-wctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-sem }()
	msgs, err := r.ReceiveMessages(wctx, n, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if wctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	return msgs, nil
}

// lease builds the driver lease for a held message; its expiry is on this
// machine's clock.
func (d *Driver) lease(h *held) driver.Lease {
	l := driver.Lease{MessageID: h.msg.MessageID, Token: tokenString(h.msg.LockToken), Private: h}
	if h.msg.LockedUntil != nil {
		l.Expiry = d.clock.local(*h.msg.LockedUntil)
	}
	return l
}

func tokenString(t [16]byte) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, c := range t {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return string(b)
}

// taskID returns the task ID jobq stored with the message, or "" (the
// portable layer then reads it from the body).
func taskID(m *azservicebus.ReceivedMessage) string {
	if id, ok := m.ApplicationProperties[PropTaskID].(string); ok {
		return id
	}
	return ""
}

// maxPriorDeliveries bounds the deliveries a copy says its originals had:
// more than any real task reaches, small enough that adding the broker's
// count cannot overflow.
const maxPriorDeliveries = 1 << 30

// intProp reads a whole-number application property jobq set, as 0 when it
// is missing, malformed or negative (a damaged message), and at most
// maxPriorDeliveries.
func intProp(m *azservicebus.ReceivedMessage, name string) int {
	var n int64
	switch v := m.ApplicationProperties[name].(type) {
	case int64:
		n = v
	case int32:
		n = int64(v)
	case string:
		n, _ = strconv.ParseInt(v, 10, 64)
	}
	return int(min(max(n, 0), maxPriorDeliveries))
}

// deliveryProps reads the deliveries a message's originals had before
// requeues copied it, and how many of all its earlier deliveries must not
// use up a retry. Damaged values cannot widen the retry budget: each is
// at least 0, and the uncounted ones are at most the earlier deliveries.
func deliveryProps(m *azservicebus.ReceivedMessage) (prior, uncounted int) {
	prior = intProp(m, PropPriorDeliveries)
	earlier := max(int(m.DeliveryCount), 1) - 1 + prior
	return prior, min(intProp(m, PropUncountedDeliveries), earlier)
}

// heldOf returns the lease's message, or LockLost when the lease is not one
// of ours or was settled already.
func (d *Driver) heldOf(op string, l driver.Lease) (*held, error) {
	h, ok := l.Private.(*held)
	if !ok || h == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "servicebus %s: the lease was not issued by this driver", op)
	}
	if h.settled.Load() {
		return nil, d.lockLost(op)
	}
	return h, nil
}

// Renew implements driver.Driver with RenewMessageLock. Service Bus renews
// for the queue's lock duration; visibility cannot change that, and the
// returned lease's Expiry is the lock's real expiry.
func (d *Driver) Renew(ctx context.Context, l driver.Lease, visibility time.Duration) (driver.Lease, error) {
	const op = "renew"
	if err := d.closing.Err(); err != nil {
		return l, err
	}
	h, err := d.heldOf(op, l)
	if err != nil {
		return l, err
	}
	if err := h.recv.RenewMessageLock(ctx, h.msg, nil); err != nil {
		return l, d.fail(op, err)
	}
	d.clock.observe(h.msg.LockedUntil, time.Now())
	return d.lease(h), nil
}
