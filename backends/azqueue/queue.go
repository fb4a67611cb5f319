package azqueue

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/blobresults"
)

// parallelism bounds the requests one batch call has in flight: Storage
// Queue has no batch API, so a batch is one request per message.
const parallelism = 16

// DeadLetterQueue is the SDK client of a queue's dead-letter queue
// (QUEUE-failed), reachable through Queue.As.
type DeadLetterQueue struct {
	*azqueue.QueueClient
}

// Driver is an open Azure Storage queue and its dead-letter queue; it
// implements driver.Driver. Build one with New or NewFromCredential, or
// open a URL through jobq.Open. It never closes or changes the clients it
// was given (the SDK clients hold nothing to close).
type Driver struct {
	cfg    config
	main   *azqueue.QueueClient
	failed *azqueue.QueueClient
	// where names the account in messages; name is ACCOUNT/QUEUE.
	where   string
	name    string
	log     *slog.Logger
	caps    driver.Capabilities
	closing *driver.Closing
	// empties counts consecutive empty dequeues, for the poll backoff;
	// gate spaces the idle dequeues.
	empties atomic.Int64
	gate    pollGate
	// rec keeps the result records (driver.ResultStore).
	rec blobresults.Records
}

func newDriver(c config, main, failed *azqueue.QueueClient, where string, log *slog.Logger) *Driver {
	return &Driver{cfg: c, main: main, failed: failed, where: where, name: where + "/" + c.queue, log: log, caps: capabilities(),
		closing: driver.NewClosing("queue " + where + "/" + c.queue)}
}

// claim is one dequeue of one message. Every copy of the lease points at the
// same claim, so settlements always use the newest pop receipt even when a
// renewal raced with them, and a claim never uses another claim's receipt
// (the fence).
type claim struct {
	mu         sync.Mutex
	messageID  string
	popReceipt string
	// text is the message text as stored; Update Message must resend it.
	text         string
	dequeueCount int
	// expiry is the lease's end as reported: counted from before the
	// request, so never later than the service's.
	expiry time.Time
	// heldUntil is counted from the response instead, never earlier than
	// the service's end. Between the two only the service can tell, and its
	// pop receipt check does.
	heldUntil time.Time
	settled   bool
	// stale is set when a renewal was probably applied but its response,
	// which carried the new pop receipt, was lost: the service holds the
	// message for us until expiry, but nothing can settle or renew it.
	stale bool
	// doubt is set when a renewal failed after an unanswered attempt: it
	// may have been applied, changing the receipt without our knowing.
	doubt bool
}

// use locks the claim for one operation, or reports why its lease is gone.
// The expiry check keeps the fence strict where the service would not be:
// Azure accepts an expired pop receipt until somebody else dequeues the
// message.
func (c *claim) use() error {
	c.mu.Lock()
	switch {
	case c.settled:
		c.mu.Unlock()
		return lockLost(c.messageID, "the message was already settled")
	case c.stale:
		c.mu.Unlock()
		return lockLost(c.messageID, fmt.Sprintf("the response to an earlier renewal was lost, so the message's new pop receipt is unknown; it is delivered again after %s", c.heldUntil.Format(time.RFC3339Nano)))
	case !c.heldUntil.IsZero() && !time.Now().Before(c.heldUntil):
		c.mu.Unlock()
		return lockLost(c.messageID, fmt.Sprintf("the lease expired at %s", c.expiry.Format(time.RFC3339Nano)))
	}
	return nil
}

func claimOf(l driver.Lease) *claim {
	if c, ok := l.Private.(*claim); ok {
		return c
	}
	// A lease rebuilt by hand: settle with its token, text unknown, and
	// leave the fence to the service.
	return &claim{messageID: l.MessageID, popReceipt: l.Token, expiry: l.Expiry}
}

func (c *claim) lease() driver.Lease {
	return driver.Lease{MessageID: c.messageID, Token: c.popReceipt, Expiry: c.expiry, Private: c}
}

// seconds converts d to the whole seconds Azure takes, rounding up so that a
// lease is never shorter than asked.
func seconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(math.Ceil(d.Seconds()))
}

// Capabilities implements driver.Driver.
func (q *Driver) Capabilities() driver.Capabilities { return q.caps }

// createQueues creates the queue and its dead-letter queue when missing.
func (q *Driver) createQueues(ctx context.Context) error {
	for _, c := range []*azqueue.QueueClient{q.main, q.failed} {
		if err := q.createQueue(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func (q *Driver) createQueue(ctx context.Context, c *azqueue.QueueClient) error {
	_, err := c.Create(ctx, nil)
	switch {
	case err == nil, queueerror.HasCode(err, queueerror.QueueAlreadyExists):
		return nil
	case errorCode(err) == errcode.PermissionDenied:
		// An identity may be allowed to use queues but not create them;
		// the queue may exist, and a later call says clearly if not.
		q.log.Debug("azqueue: not allowed to create the queue; assuming it exists", "queue", queueNameOf(c), "error", err)
		return nil
	}
	return wrap(err, "create queue %s in account %s", queueNameOf(c), q.where)
}

// Push implements driver.Driver: one Put Message per message, with a
// time-to-live of -1 (never expire, as ai4s-jobq) and the NotBefore delay as
// the initial visibility timeout. Messages go out in parallel; after a
// failure no new ones are started, and the results of the prefix before the
// failed message are returned. The error says MaybeApplied when a message
// after that prefix may be stored: one already in flight that succeeded,
// or one whose Put Message went unanswered. A message the SDK sent again
// after an unanswered attempt is reported Resent: the queue may hold it
// twice (at-least-once).
func (q *Driver) Push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	if err := q.closing.Err(); err != nil {
		return nil, err
	}
	if err := q.rec.AddPushGroups(ctx, msgs); err != nil {
		return nil, err
	}
	results := make([]driver.PushResult, len(msgs))
	errs := parallel(ctx, len(msgs), true, func(ctx context.Context, i int) error {
		var err error
		results[i].MessageID, results[i].Resent, err = q.push(ctx, msgs[i])
		return err
	})
	for i, err := range errs {
		if err != nil {
			return results[:i], pushFailed(err, errs[i+1:])
		}
	}
	return results, nil
}

// pushFailed returns err, the first failure of a parallel push, marked
// MaybeApplied when one of the messages after it may have been stored:
// later holds their outcomes, nil where one was stored.
func pushFailed(err error, later []error) error {
	de, ok := err.(*driver.Error)
	if !ok || de.Applied == driver.MaybeApplied {
		return err
	}
	for _, e := range later {
		if e == nil || driver.AppliedOf(e, errorCode(e)) == driver.MaybeApplied {
			c := *de
			c.Applied = driver.MaybeApplied
			c.Msg += " (messages after it in the batch may have been stored)"
			return &c
		}
	}
	return err
}

// push stores one message and returns its message ID, and whether an
// unanswered attempt preceded the one that stored it (the SDK retried). A
// failed push's error says whether any attempt may have stored it.
func (q *Driver) push(ctx context.Context, m *driver.Message) (id string, resent bool, err error) {
	text := encodeText(m.Body)
	if len(text) > MaxMessageBytes {
		return "", false, tooLarge(m.ID, len(text))
	}
	var delay time.Duration
	if !m.NotBefore.IsZero() {
		delay = time.Until(m.NotBefore)
	}
	if delay > MaxVisibility {
		return "", false, driver.Errorf(errcode.InvalidArgument,
			"task %s is scheduled %v ahead; Azure Storage Queue can delay a message by at most 7 days", m.ID, delay.Round(time.Second))
	}
	ctx, out := track(ctx)
	resp, err := q.main.EnqueueMessage(ctx, text, &azqueue.EnqueueMessageOptions{
		TimeToLive:        to.Ptr(int32(-1)),
		VisibilityTimeout: to.Ptr(seconds(delay)),
	})
	ambiguous := out.ambiguous.Load()
	if err != nil {
		werr := wrap(err, "push task %s to %s", m.ID, q.name).(*driver.Error)
		werr.Applied = driver.NotApplied
		if ambiguous {
			werr.Applied = driver.MaybeApplied
		}
		return "", false, werr
	}
	if len(resp.Messages) == 0 || resp.Messages[0].MessageID == nil {
		return "", false, &driver.Error{Code: errcode.Internal, Applied: driver.MaybeApplied,
			Msg: fmt.Sprintf("push task %s to %s: the service returned no message ID", m.ID, q.name)}
	}
	return *resp.Messages[0].MessageID, ambiguous, nil
}

func tooLarge(id string, n int) error {
	return driver.Errorf(errcode.TooLarge,
		"task %s is %d bytes as Azure Storage Queue message text, over the limit of %d bytes (64 KiB); configure a stash for large payloads (--stash, $JOBQ_STASH or stash= in the queue URL)",
		id, n, MaxMessageBytes)
}

// Receive implements driver.Driver. Storage Queue has no long poll, so
// waiting is polling. While the queue is busy every Receive dequeues at
// once. After an empty dequeue the queue is idle, and the receivers of this
// queue take turns: one dequeue per pause, whichever receiver's turn it is,
// so that `worker -n 16` costs no more than one receiver. The pause starts
// at poll_min and doubles with every further empty dequeue up to poll_max;
// a dequeue that finds messages ends the idle state and wakes the waiting
// receivers at once. Receive with Wait 0 always dequeues once.
func (q *Driver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	if err := q.closing.Err(); err != nil {
		return nil, err
	}
	if p.Visibility > MaxVisibility {
		return nil, driver.Errorf(errcode.InvalidArgument, "visibility timeout %v exceeds Azure Storage Queue's maximum of 7 days", p.Visibility)
	}
	deadline := time.Now().Add(p.Wait)
	for {
		if p.Wait > 0 && q.empties.Load() > 0 {
			turn, err := q.awaitTurn(ctx, deadline)
			if err != nil || !turn {
				return nil, err
			}
		}
		recs, err := q.dequeue(ctx, p.Max, p.Visibility)
		if err != nil || len(recs) > 0 {
			return recs, err
		}
		if !time.Now().Before(deadline) {
			return nil, nil
		}
	}
}

// pollGate spaces the dequeues of an idle queue's receivers.
type pollGate struct {
	mu sync.Mutex
	// next is when the next idle dequeue may start.
	next time.Time
	// wake is closed when a dequeue finds messages.
	wake chan struct{}
}

// awaitTurn waits until this receiver may dequeue from an idle queue. It
// returns false when the deadline comes first.
func (q *Driver) awaitTurn(ctx context.Context, deadline time.Time) (bool, error) {
	g := &q.gate
	g.mu.Lock()
	if g.wake == nil {
		g.wake = make(chan struct{})
	}
	now := time.Now()
	at := g.next
	if at.Before(now) {
		at = now
	}
	turn := at.Before(deadline)
	if turn {
		g.next = at.Add(q.pollPause())
	} else {
		at = deadline
	}
	wake := g.wake
	g.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-wake:
		return true, nil
	case <-t.C:
		return turn, nil
	}
}

// busy ends the idle state after a dequeue found messages.
func (q *Driver) busy() {
	if q.empties.Swap(0) == 0 {
		return
	}
	g := &q.gate
	g.mu.Lock()
	g.next = time.Time{}
	if g.wake != nil {
		close(g.wake)
		g.wake = nil
	}
	g.mu.Unlock()
}

// pollPause returns how long to sleep after another empty dequeue.
func (q *Driver) pollPause() time.Duration {
	n := q.empties.Load()
	d := q.cfg.pollMin
	for i := int64(1); i < n && d < q.cfg.pollMax; i++ {
		d *= 2
	}
	return min(d, q.cfg.pollMax)
}

func (q *Driver) dequeue(ctx context.Context, n int, vis time.Duration) ([]*driver.Received, error) {
	n = min(max(n, 1), MaxBatch)
	secs := max32(seconds(vis), 1)
	start := time.Now()
	resp, err := q.main.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{
		NumberOfMessages:  to.Ptr(int32(n)),
		VisibilityTimeout: to.Ptr(secs),
	})
	if err != nil {
		return nil, wrap(err, "receive from %s", q.name)
	}
	if len(resp.Messages) == 0 {
		q.empties.Add(1)
		return nil, nil
	}
	q.busy()
	lease := time.Duration(secs) * time.Second
	expiry, heldUntil := start.Add(lease), time.Now().Add(lease)
	out := make([]*driver.Received, 0, len(resp.Messages))
	for _, m := range resp.Messages {
		c := &claim{
			messageID:    deref(m.MessageID),
			popReceipt:   deref(m.PopReceipt),
			text:         deref(m.MessageText),
			dequeueCount: int(derefInt(m.DequeueCount)),
			expiry:       expiry,
			heldUntil:    heldUntil,
		}
		r := &driver.Received{
			Body:          decodeText(c.text),
			DeliveryCount: c.dequeueCount,
			Lease:         c.lease(),
		}
		if m.InsertionTime != nil {
			r.EnqueuedAt = *m.InsertionTime
		}
		out = append(out, r)
	}
	return out, nil
}

// Renew implements driver.Driver with Update Message (same text, new
// visibility timeout). The pop receipt changes; the returned lease carries
// the new one.
func (q *Driver) Renew(ctx context.Context, lease driver.Lease, vis time.Duration) (driver.Lease, error) {
	if err := q.closing.Err(); err != nil {
		return driver.Lease{}, err
	}
	if vis > MaxVisibility {
		return driver.Lease{}, driver.Errorf(errcode.InvalidArgument, "visibility timeout %v exceeds Azure Storage Queue's maximum of 7 days", vis)
	}
	if lease.Private == nil {
		// Update Message rewrites the text, which only a real claim knows.
		return driver.Lease{}, driver.Errorf(errcode.InvalidArgument, "renew message %s: the lease did not come from this driver's Receive, so its text is unknown", lease.MessageID)
	}
	c := claimOf(lease)
	c.mu.Lock()
	stale := c.stale
	c.mu.Unlock()
	if stale {
		// Not LockLost: the service still holds the message for this
		// receiver until the lease ends, and the task may go on until then.
		return driver.Lease{}, driver.Errorf(errcode.FailedPrecondition,
			"renew message %s: an earlier renewal's response was lost, so its new pop receipt is unknown and the lease cannot be extended; it ends at %s",
			c.messageID, c.expiry.Format(time.RFC3339Nano))
	}
	if err := c.use(); err != nil {
		return driver.Lease{}, err
	}
	defer c.mu.Unlock()
	secs := max32(seconds(vis), 1)
	start := time.Now()
	ambiguous, err := q.update(ctx, c, c.text, secs)
	d := time.Duration(secs) * time.Second
	switch {
	case err == nil:
	case (ambiguous || c.doubt) && errorCode(err) == errcode.LockLost:
		// An attempt (of this renewal, or of one that failed before it)
		// went unanswered, and now the receipt has changed: most likely
		// that attempt was applied, and the message is hidden for us with
		// a receipt we never saw. The task goes on; the message cannot be
		// settled and is delivered again after the lease.
		c.stale = true
		q.log.Warn("azqueue: a lease renewal's response was lost; the task goes on, but the message's new pop receipt is unknown, so it will be delivered again when this lease ends",
			"message_id", c.messageID, "lease_end", start.Add(d), "error", err)
	default:
		if ambiguous {
			c.doubt = true
		}
		return driver.Lease{}, q.claimFailed(c, err, "renew the lease on")
	}
	c.expiry, c.heldUntil = start.Add(d), time.Now().Add(d)
	return c.lease(), nil
}

// update runs Update Message for a held claim and records the new receipt.
// ambiguous reports whether an attempt went unanswered (see track): a
// failure after one may hide an update that was applied.
func (q *Driver) update(ctx context.Context, c *claim, text string, secs int32) (ambiguous bool, err error) {
	ctx, out := track(ctx)
	resp, err := q.main.UpdateMessage(ctx, c.messageID, c.popReceipt, text, &azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(secs)})
	if err != nil {
		return out.ambiguous.Load(), err
	}
	if resp.PopReceipt != nil {
		c.popReceipt = *resp.PopReceipt
	}
	c.text = text
	return false, nil
}

// Complete implements driver.Driver with Delete Message. Records live in
// the results container (Results Emulated), so the requests carry none.
func (q *Driver) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	if err := q.closing.Err(); err != nil {
		return driver.FanOut(err, len(reqs))
	}
	return collapse(parallel(ctx, len(reqs), false, func(ctx context.Context, i int) error {
		c := claimOf(reqs[i].Lease)
		if err := c.use(); err != nil {
			return err
		}
		defer c.mu.Unlock()
		return q.deleteClaim(ctx, c, "complete")
	}))
}

func (q *Driver) deleteClaim(ctx context.Context, c *claim, what string) error {
	ambiguous, err := q.deleteMessage(ctx, c)
	switch {
	case err == nil:
	case ambiguous && errorCode(err) == errcode.LockLost:
		// An unanswered attempt most likely deleted the message, and the
		// retry found it gone. (Were it another receiver's now, it would
		// run there: nothing is lost either way.)
		q.log.Debug("azqueue: delete retried after an unanswered attempt found the message gone; taking it as deleted", "message_id", c.messageID)
	default:
		return q.claimFailed(c, err, what)
	}
	c.settled = true
	return nil
}

// deleteMessage runs Delete Message for a held claim; ambiguous is as for
// update.
func (q *Driver) deleteMessage(ctx context.Context, c *claim) (ambiguous bool, err error) {
	ctx, out := track(ctx)
	if _, err := q.main.DeleteMessage(ctx, c.messageID, c.popReceipt, nil); err != nil {
		return out.ambiguous.Load(), err
	}
	return false, nil
}

// claimFailed is the error of a request on c's message that failed with
// err: LockLost (c then counts as settled) when the service no longer knows
// the receipt or the message, else err wrapped with what was being done.
func (q *Driver) claimFailed(c *claim, err error, what string) error {
	if code := errorCode(err); code == errcode.LockLost || code == errcode.NotFound {
		c.settled = true
		return &driver.Error{Code: errcode.LockLost, Err: err,
			Msg: fmt.Sprintf("lease on message %s lost: another receiver holds it or it was deleted (HTTP %s)", c.messageID, statusOf(err))}
	}
	return wrap(err, "%s message %s in %s", what, c.messageID, q.name)
}

// Requeue implements driver.Driver with Update Message: the visibility
// timeout becomes the delay, and a new body replaces the text in place.
func (q *Driver) Requeue(ctx context.Context, reqs []driver.RequeueParams) []error {
	if err := q.closing.Err(); err != nil {
		return driver.FanOut(err, len(reqs))
	}
	return collapse(parallel(ctx, len(reqs), false, func(ctx context.Context, i int) error {
		r := reqs[i]
		if r.Delay > MaxVisibility {
			return driver.Errorf(errcode.InvalidArgument, "requeue delay %v exceeds Azure Storage Queue's maximum of 7 days", r.Delay)
		}
		c := claimOf(r.Lease)
		if err := c.use(); err != nil {
			return err
		}
		defer c.mu.Unlock()
		text := c.text
		if r.Body != nil {
			text = encodeText(r.Body)
			if len(text) > MaxMessageBytes {
				return tooLarge(c.messageID, len(text))
			}
		} else if r.Lease.Private == nil {
			return driver.Errorf(errcode.InvalidArgument, "requeue message %s: the lease did not come from this driver's Receive, so its text is unknown", c.messageID)
		}
		ambiguous, err := q.update(ctx, c, text, seconds(r.Delay))
		if err != nil && !(ambiguous && errorCode(err) == errcode.LockLost) {
			return q.claimFailed(c, err, "requeue")
		}
		// After an unanswered attempt, a lost lease most likely means that
		// attempt requeued the message; were it another receiver's now, it
		// would run there. Nothing is lost either way.
		c.settled = true
		return nil
	}))
}

// Peek implements driver.Driver with Peek Messages (visible messages only,
// at most 32).
func (q *Driver) Peek(ctx context.Context, n int) ([]*driver.PeekedMessage, error) {
	if err := q.closing.Err(); err != nil {
		return nil, err
	}
	ms, err := peek(ctx, q.main, n)
	if err != nil {
		return nil, wrap(err, "peek %s", q.name)
	}
	out := make([]*driver.PeekedMessage, len(ms))
	for i, m := range ms {
		body := decodeText(deref(m.MessageText))
		out[i] = &driver.PeekedMessage{
			MessageID:     deref(m.MessageID),
			ID:            taskID(body),
			Body:          body,
			DeliveryCount: int(derefInt(m.DequeueCount)),
			EnqueuedAt:    derefTime(m.InsertionTime),
		}
	}
	return out, nil
}

func peek(ctx context.Context, c *azqueue.QueueClient, n int) ([]*azqueue.PeekedMessage, error) {
	n = min(max(n, 1), MaxBatch)
	resp, err := c.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(n))})
	if err != nil {
		return nil, err
	}
	return resp.Messages, nil
}

// Stats implements driver.Driver with Get Queue Metadata on both queues.
// Azure's approximate count includes in-flight and delayed messages, so it
// is reported as Ready and those two are unknown.
func (q *Driver) Stats(ctx context.Context) (driver.Stats, error) {
	if err := q.closing.Err(); err != nil {
		return driver.Stats{}, err
	}
	ready, err := approximateCount(ctx, q.main)
	if err != nil && errorCode(err) == errcode.NotFound {
		return driver.Stats{}, wrap(err, "count messages in %s: the queue does not exist (a read creates nothing: check the account and queue name, or push to it or run a worker, which create it)", q.name)
	}
	if err != nil {
		return driver.Stats{}, wrap(err, "count messages in %s", q.name)
	}
	dead, err := approximateCount(ctx, q.failed)
	if err != nil && errorCode(err) != errcode.NotFound {
		return driver.Stats{}, wrap(err, "count dead letters in %s%s", q.name, FailedSuffix)
	}
	return driver.Stats{Ready: ready, Dead: dead, Known: driver.KnownCounts{Ready: true, Dead: true}}, nil
}

func approximateCount(ctx context.Context, c *azqueue.QueueClient) (int64, error) {
	p, err := c.GetProperties(ctx, nil)
	if err != nil {
		return 0, err
	}
	return int64(derefInt32(p.ApproximateMessagesCount)), nil
}

// Clear implements driver.Driver with Clear Messages, which cannot say how
// many it deleted. On large queues the service may answer 500
// OperationTimedOut part-way; the retry policy repeats the call until done.
func (q *Driver) Clear(ctx context.Context) (int64, error) {
	if err := q.closing.Err(); err != nil {
		return 0, err
	}
	if _, err := q.main.ClearMessages(ctx, nil); err != nil {
		return 0, wrap(err, "clear %s", q.name)
	}
	return -1, nil
}

// ErrorCode implements driver.Driver.
func (q *Driver) ErrorCode(err error) errcode.Code { return errorCode(err) }

// As implements driver.Driver: **azqueue.QueueClient is the main queue's
// client, *DeadLetterQueue the dead-letter queue's.
func (q *Driver) As(target any) bool {
	switch t := target.(type) {
	case **azqueue.QueueClient:
		*t = q.main
		return true
	case *DeadLetterQueue:
		t.QueueClient = q.failed
		return true
	}
	return false
}

// Close implements driver.Driver. The SDK clients hold no resources beyond
// pooled HTTP connections.
func (q *Driver) Close() error {
	if !q.closing.Close() {
		return q.closing.Err()
	}
	return nil
}

// parallel runs fn for indexes 0..n-1 with at most `parallelism` in flight
// and returns one error per index. With stopOnError, indexes not yet started
// when one fails are not run and get that failure's context error.
func parallel(ctx context.Context, n int, stopOnError bool, fn func(context.Context, int) error) []error {
	errs := make([]error, n)
	if n == 1 {
		errs[0] = fn(ctx, 0)
		return errs
	}
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
		sem    = make(chan struct{}, parallelism)
	)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		if stopOnError && failed.Load() {
			<-sem
			errs[i] = &driver.Error{Code: errcode.Canceled, Applied: driver.NotApplied, Msg: "not attempted after an earlier message in the batch failed"}
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if errs[i] = fn(ctx, i); errs[i] != nil {
				failed.Store(true)
			}
		}(i)
	}
	wg.Wait()
	return errs
}

// collapse returns nil when every entry is nil, as the batch convention asks.
func collapse(errs []error) []error {
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

func statusOf(err error) string {
	for _, code := range []queueerror.Code{queueerror.PopReceiptMismatch, queueerror.MessageNotFound, queueerror.QueueNotFound} {
		if queueerror.HasCode(err, code) {
			return string(code)
		}
	}
	return "error"
}

// queueNameOf returns the queue name of a client, without the URL's query
// (which may hold a SAS token).
func queueNameOf(c *azqueue.QueueClient) string {
	u, err := url.Parse(c.URL())
	if err != nil {
		return "(queue)"
	}
	return path.Base(u.Path)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

func derefInt32(n *int32) int32 {
	if n == nil {
		return 0
	}
	return *n
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}
