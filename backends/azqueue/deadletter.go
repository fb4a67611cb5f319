package azqueue

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// deadScanLease is how long a dead letter stays hidden while a scan looks at
// it; a crashed scan's letters reappear after this.
const deadScanLease = 60 * time.Second

// DeadLetter implements driver.Driver: send the dead letter to QUEUE-failed
// (time-to-live -1), then delete the original. When the delete fails, the
// copy is deleted again only if the original certainly still exists (the
// service refused the delete without an unanswered attempt before it), so
// the call changes nothing. Whenever the original may be gone — an attempt
// went unanswered, or the service says the message no longer exists — the
// copy stays: the task may then exist twice, never zero times.
func (q *Driver) DeadLetter(ctx context.Context, reqs []driver.DeadLetterParams) []error {
	if err := q.closing.Err(); err != nil {
		return driver.FanOut(err, len(reqs))
	}
	return collapse(parallel(ctx, len(reqs), false, func(ctx context.Context, i int) error {
		r := reqs[i]
		c := claimOf(r.Lease)
		if err := c.use(); err != nil {
			return err
		}
		defer c.mu.Unlock()
		if r.Lease.Private == nil {
			return driver.Errorf(errcode.InvalidArgument, "dead-letter message %s: the lease did not come from this driver's Receive, so its text is unknown", c.messageID)
		}
		body, kept := deadBody(decodeText(c.text), deadInfo{
			Reason:        r.Reason,
			Detail:        r.Detail,
			DeadAt:        time.Now().UTC(),
			DeliveryCount: c.dequeueCount,
			MessageID:     c.messageID,
		}, MaxMessageBytes)
		text := encodeText(body)
		if !kept {
			q.log.Warn("azqueue: dead letter too large to carry its reason; storing the task without it",
				"message_id", c.messageID, "reason", r.Reason)
			// The message's own text, which the service took and so takes
			// again: a body that is not plain text (a foreign poison
			// message) would grow by a third as base64, be refused, and
			// come back forever.
			text = c.text
		}
		copyID, copyReceipt, err := q.sendDead(ctx, text)
		if err != nil {
			return err
		}
		ambiguous, err := q.deleteMessage(ctx, c)
		if err == nil {
			c.settled = true
			return nil
		}
		if ambiguous || queueerror.HasCode(err, queueerror.MessageNotFound) {
			if ambiguous && errorCode(err) == errcode.LockLost {
				// The unanswered attempt most likely deleted the original.
				c.settled = true
				return nil
			}
			q.log.Warn("azqueue: dead-lettered, but the original may still exist (its delete failed); the dead letter is kept, so the task may exist twice",
				"message_id", c.messageID, "dead_letter_id", copyID, "error", err)
			return q.claimFailed(c, err, "dead-letter")
		}
		if _, derr := q.failed.DeleteMessage(context.WithoutCancel(ctx), copyID, copyReceipt, nil); derr != nil {
			q.log.Warn("azqueue: the original could not be deleted nor its dead-letter copy removed; the task now exists twice",
				"message_id", c.messageID, "dead_letter_id", copyID, "error", derr)
		}
		return q.claimFailed(c, err, "dead-letter")
	}))
}

// sendDead stores a dead letter, creating QUEUE-failed when it is missing.
func (q *Driver) sendDead(ctx context.Context, text string) (id, receipt string, err error) {
	for attempt := 0; ; attempt++ {
		resp, err := q.failed.EnqueueMessage(ctx, text, &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(-1))})
		if err == nil && len(resp.Messages) > 0 {
			m := resp.Messages[0]
			return deref(m.MessageID), deref(m.PopReceipt), nil
		}
		if err == nil {
			return "", "", driver.Errorf(errcode.Internal, "dead-letter to %s%s: the service returned no message", q.name, FailedSuffix)
		}
		if attempt == 0 && errorCode(err) == errcode.NotFound {
			if cerr := q.createQueue(ctx, q.failed); cerr != nil {
				return "", "", cerr
			}
			continue
		}
		return "", "", wrap(err, "dead-letter to %s%s", q.name, FailedSuffix)
	}
}

// deadMessage turns a message of QUEUE-failed into a DeadMessage. Its
// MessageID is the message's ID in QUEUE-failed, which stays the same until
// the letter is requeued or purged.
func deadMessage(id, text string, dequeueCount int64, inserted *time.Time) *driver.DeadMessage {
	orig, info := parseDead(decodeText(text))
	d := &driver.DeadMessage{
		MessageID:     id,
		ID:            taskID(orig),
		Body:          orig,
		Reason:        info.Reason,
		Detail:        info.Detail,
		DeliveryCount: info.DeliveryCount,
		DeadAt:        info.DeadAt,
	}
	if d.Reason == "" {
		d.Reason = "(no reason recorded; dead-lettered by ai4s-jobq or another tool)"
	}
	if d.DeadAt.IsZero() {
		d.DeadAt = derefTime(inserted)
	}
	return d
}

// ListDead implements driver.Driver. Up to 32 dead letters are peeked,
// changing nothing; more are read by briefly dequeuing them (see scanDead).
func (q *Driver) ListDead(ctx context.Context, n int) ([]*driver.DeadMessage, error) {
	if err := q.closing.Err(); err != nil {
		return nil, err
	}
	if n <= MaxBatch {
		ms, err := peek(ctx, q.failed, n)
		if errorCode(err) == errcode.NotFound {
			return nil, nil
		}
		if err != nil {
			return nil, wrap(err, "list dead letters in %s%s", q.name, FailedSuffix)
		}
		out := make([]*driver.DeadMessage, len(ms))
		for i, m := range ms {
			out[i] = deadMessage(deref(m.MessageID), deref(m.MessageText), derefInt(m.DequeueCount), m.InsertionTime)
		}
		return out, nil
	}
	var out []*driver.DeadMessage
	_, err := q.scanDead(ctx, func(m *azqueue.DequeuedMessage, d *driver.DeadMessage) (deadAction, bool) {
		out = append(out, d)
		return keepDead, len(out) >= n
	})
	return out, err
}

// RequeueDead implements driver.Driver: each chosen dead letter is sent
// back to the queue as it was before it died (visible at once, time-to-live
// -1) and then deleted from QUEUE-failed. ids match a dead letter's
// MessageID or its task ID.
func (q *Driver) RequeueDead(ctx context.Context, ids []string) (int64, error) {
	return q.settleDead(ctx, ids, requeueDead)
}

// PurgeDead implements driver.Driver. ids match a dead letter's MessageID or
// its task ID. Letters are deleted one by one, so the count is exact.
func (q *Driver) PurgeDead(ctx context.Context, ids []string) (int64, error) {
	return q.settleDead(ctx, ids, purgeDead)
}

func (q *Driver) settleDead(ctx context.Context, ids []string, action deadAction) (int64, error) {
	if err := q.closing.Err(); err != nil {
		return 0, err
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	if ids != nil && len(want) == 0 {
		return 0, nil
	}
	return q.scanDead(ctx, func(m *azqueue.DequeuedMessage, d *driver.DeadMessage) (deadAction, bool) {
		if ids == nil {
			return action, false
		}
		for _, id := range []string{d.MessageID, d.ID} {
			if id != "" && want[id] {
				delete(want, d.MessageID)
				delete(want, d.ID)
				return action, len(want) == 0
			}
		}
		return keepDead, false
	})
}

type deadAction int

const (
	keepDead deadAction = iota
	requeueDead
	purgeDead
)

// scanDead walks QUEUE-failed by dequeuing up to 32 letters at a time with
// a short lease (Storage Queue can only delete what it has dequeued, and
// peek sees only the first 32). visit decides each letter's fate and whether
// to stop. Kept letters are made visible again when the scan ends. Every
// letter seen costs a dequeue share plus one update or delete. It returns
// how many letters were requeued or purged: a failed one is not counted.
func (q *Driver) scanDead(ctx context.Context, visit func(*azqueue.DequeuedMessage, *driver.DeadMessage) (deadAction, bool)) (done int64, err error) {
	// kept maps a letter's ID to its latest dequeue (the receipt to release
	// it with).
	kept := map[string]*azqueue.DequeuedMessage{}
	defer func() { q.releaseDead(context.WithoutCancel(ctx), kept) }()
	for {
		resp, err := q.failed.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{
			NumberOfMessages:  to.Ptr(int32(MaxBatch)),
			VisibilityTimeout: to.Ptr(seconds(deadScanLease)),
		})
		if errorCode(err) == errcode.NotFound {
			return done, nil
		}
		if err != nil {
			return done, wrap(err, "read dead letters in %s%s", q.name, FailedSuffix)
		}
		if len(resp.Messages) == 0 {
			return done, nil
		}
		// A scan longer than deadScanLease meets kept letters again, which
		// means it has seen the whole queue.
		wrapped := false
		for _, m := range resp.Messages {
			id := deref(m.MessageID)
			if _, seen := kept[id]; seen {
				kept[id] = m
				wrapped = true
				continue
			}
			if wrapped {
				kept[id] = m
				continue
			}
			d := deadMessage(id, deref(m.MessageText), derefInt(m.DequeueCount), m.InsertionTime)
			action, stop := visit(m, d)
			switch action {
			case keepDead:
				kept[id] = m
			case requeueDead:
				if err := q.requeueDead(ctx, m, d); err != nil {
					kept[id] = m
					return done, err
				}
				done++
			case purgeDead:
				if err := q.deleteDead(ctx, m); err != nil {
					kept[id] = m
					return done, wrap(err, "purge dead letter %s from %s%s", id, q.name, FailedSuffix)
				}
				done++
			}
			if stop {
				wrapped = true
			}
		}
		if wrapped {
			return done, nil
		}
	}
}

// requeueDead deletes a dead letter's result record, sends its original
// body back to the queue, then deletes the letter (a crash in between
// duplicates the task). A letter
// without jobq's record (written by ai4s-jobq or another tool, or a poison
// message too large to carry one) goes back as the very text it holds:
// re-encoded, a foreign base64 message would turn into plain text, and a
// large plain-text one into base64 too large to store.
func (q *Driver) requeueDead(ctx context.Context, m *azqueue.DequeuedMessage, d *driver.DeadMessage) error {
	// Before the send: the new run may end, and write its record, at once.
	if err := q.rec.ForgetRequeued(ctx, d.ID); err != nil {
		return wrap(err, "requeue dead letter %s: delete its result record", d.MessageID)
	}
	text := deref(m.MessageText)
	if !bytes.Equal(d.Body, decodeText(text)) {
		text = encodeText(d.Body)
	}
	if _, err := q.main.EnqueueMessage(ctx, text, &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(-1))}); err != nil {
		return wrap(err, "requeue dead letter %s to %s", d.MessageID, q.name)
	}
	if err := q.deleteDead(ctx, m); err != nil {
		return wrap(err, "delete requeued dead letter %s from %s%s (the task is now queued and still dead-lettered)", d.MessageID, q.name, FailedSuffix)
	}
	return nil
}

// deleteDead deletes a dead letter a scan dequeued. A lost receipt after
// an unanswered attempt means that attempt deleted it.
func (q *Driver) deleteDead(ctx context.Context, m *azqueue.DequeuedMessage) error {
	ctx, out := track(ctx)
	_, err := q.failed.DeleteMessage(ctx, deref(m.MessageID), deref(m.PopReceipt), nil)
	if err != nil && out.ambiguous.Load() && errorCode(err) == errcode.LockLost {
		return nil
	}
	return err
}

// releaseDead makes dead letters a scan kept visible again.
func (q *Driver) releaseDead(ctx context.Context, ms map[string]*azqueue.DequeuedMessage) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallelism)
	for _, m := range ms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := q.failed.UpdateMessage(ctx, deref(m.MessageID), deref(m.PopReceipt), deref(m.MessageText),
				&azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(int32(0))})
			if err != nil {
				q.log.Warn("azqueue: could not release a dead letter after a scan; it reappears by itself",
					"dead_letter_id", deref(m.MessageID), "after", deadScanLease, "error", err)
			}
		}()
	}
	wg.Wait()
}
