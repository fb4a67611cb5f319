package jobq

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// DeadLetter is one message in the dead-letter store.
type DeadLetter struct {
	// MessageID identifies the dead letter for Requeue and Purge.
	MessageID string
	// Task is the decoded task; nil when the message cannot be decoded (a
	// poison message), in which case DecodeErr says why.
	Task      *Task
	DecodeErr error
	Body      []byte
	// Reason is why the message was dead-lettered; Detail holds more, such
	// as the tail of the task's output.
	Reason        string
	Detail        string
	DeliveryCount int
	DeadAt        time.Time
}

// DeadLetters returns up to max of the queue's dead letters, oldest first:
// tasks that failed past their retry budget, were dead-lettered explicitly,
// or could not be decoded.
func (d *Admin) DeadLetters(ctx context.Context, max int) ([]*DeadLetter, error) {
	const op = "dlq list"
	if err := d.checkDeadLetters(op); err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, errorf(errcode.InvalidArgument, op, "count is %d; ask for at least 1", max)
	}
	ms, err := d.q.drv.ListDead(ctx, max)
	if err != nil {
		return nil, d.q.wrap(op, err)
	}
	out := make([]*DeadLetter, len(ms))
	for i, m := range ms {
		dl := &DeadLetter{MessageID: m.MessageID, Body: m.Body, Reason: m.Reason, Detail: m.Detail,
			DeliveryCount: m.DeliveryCount, DeadAt: m.DeadAt}
		dl.Task, dl.DecodeErr = unmarshalTask(m.Body)
		out[i] = dl
	}
	return out, nil
}

// RequeueDeadLetters moves the named dead letters (every one when no IDs are given)
// back to the queue and returns how many it moved.
func (d *Admin) RequeueDeadLetters(ctx context.Context, messageIDs ...string) (int64, error) {
	const op = "dlq requeue"
	if err := d.checkDeadLetters(op); err != nil {
		return 0, err
	}
	n, err := d.q.drv.RequeueDead(ctx, idsOrAll(messageIDs))
	return n, d.q.wrapWrite(op, err)
}

// PurgeDeadLetters deletes the named dead letters (every one when no IDs are given) and
// returns how many it deleted.
func (d *Admin) PurgeDeadLetters(ctx context.Context, messageIDs ...string) (int64, error) {
	const op = "dlq purge"
	if err := d.checkDeadLetters(op); err != nil {
		return 0, err
	}
	refs, taskIDs := d.q.stashedDeadLetters(ctx, messageIDs)
	n, err := d.q.drv.PurgeDead(ctx, idsOrAll(messageIDs))
	if err != nil {
		return n, d.q.wrapWrite(op, err)
	}
	// Looked up after the purge, so that a push of the same task before
	// it is seen.
	d.q.dropStashed(ctx, d.q.unqueuedStash(ctx, op, refs, taskIDs)...)
	return n, nil
}

func (d *Admin) checkDeadLetters(op string) error {
	if err := d.q.checkOpen(op); err != nil {
		return err
	}
	return d.q.degrade(op, driver.DeadLetter)
}

func idsOrAll(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	return ids
}
