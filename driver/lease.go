package driver

import (
	"time"

	"github.com/jobq/jobq/errcode"
)

// LocalLease keeps the lease contract on the driver's side for engines
// that cannot keep it by themselves:
//
//   - engines whose lease length is fixed by the queue or the consumer (a
//     Service Bus lock duration, a NATS JetStream consumer's AckWait),
//     whatever ReceiveParams.Visibility or Renew's visibility ask for; and
//   - engines whose acknowledgement is not fenced: an ack sent after the
//     lease ran out still settles the message, even when another receiver
//     holds it by then.
//
// Such a driver stamps every lease it issues or renews with Expiry, so
// that Lease.Expiry is the engine's real deadline or earlier (the portable
// layer schedules renewals and reports lost leases from it), and calls
// Check before it sends a Renew, Complete, Requeue or DeadLetter of a
// lease: once the lease is within Margin of its expiry, Check returns
// LockLost and the driver sends nothing, so a settlement never reaches a
// message another receiver may hold. What remains is a settlement that
// passed Check and takes longer than Margin to reach the engine; choose
// Margin above the engine's usual round trip and clock skew.
type LocalLease struct {
	// Length is the engine's lease length.
	Length time.Duration
	// Margin is how long before its expiry a lease counts as lost. Zero
	// means a tenth of Length.
	Margin time.Duration
}

// Expiry returns the expiry of a lease that a request sent at sent took
// or renewed: sent plus Length. Take sent before sending the request, so
// that the engine's own deadline, counted from when it served the
// request, is no earlier.
func (l LocalLease) Expiry(sent time.Time) time.Time { return sent.Add(l.Length) }

// Check returns nil while lease may still be acted on at now, and
// otherwise an error with code LockLost that names op and the message.
func (l LocalLease) Check(op string, lease Lease, now time.Time) error {
	margin := l.Margin
	if margin <= 0 {
		margin = l.Length / 10
	}
	if now.Before(lease.Expiry.Add(-margin)) {
		return nil
	}
	return Errorf(errcode.LockLost, "%s: the lease of message %s ran out at %s (within the %v safety margin at %s); another receiver may hold the message now",
		op, lease.MessageID, lease.Expiry.Format(time.RFC3339Nano), margin, now.Format(time.RFC3339Nano))
}
