package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// TxPusher pushes tasks inside the application's own transaction, so that a
// task is queued if and only if the application's writes commit. Reach it
// through the queue's escape hatch:
//
//	var txp postgres.TxPusher
//	if !q.As(&txp) {
//		// not a Postgres queue
//	}
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, "INSERT INTO orders ..."); err != nil {
//			return err
//		}
//		_, err := txp.PushTx(ctx, tx, &jobq.Task{Command: "ship-order 42"})
//		return err
//	})
//
// The transaction must be on the database that holds the queue's schema. The
// tasks become visible to receivers when it commits (the wake-up notification
// is delivered at commit too) and vanish if it rolls back. Tasks larger than
// the queue's message limit are rejected with TooLarge: the stash is not used
// inside a transaction. On a queue with a max-depth policy the push takes the
// queue's depth lock, held until the transaction ends (other pushes to the
// queue wait for it), and a push that would overflow fails with
// ResourceExhausted, undone through a savepoint so that the transaction
// stays usable.
type TxPusher interface {
	// PushTx validates and encodes tasks as Queue.PushBatch does (filling in
	// deterministic IDs) and inserts them through tx, in one statement.
	PushTx(ctx context.Context, tx pgx.Tx, tasks ...*jobq.Task) ([]jobq.PushResult, error)
}

// PushTx implements TxPusher.
func (d *pgDriver) PushTx(ctx context.Context, tx pgx.Tx, tasks ...*jobq.Task) ([]jobq.PushResult, error) {
	if err := d.begin(); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, driver.Errorf(driver.InvalidArgument, "postgres push-tx: the transaction is nil")
	}
	msgs := make([]*driver.Message, len(tasks))
	for i, t := range tasks {
		if t == nil {
			return nil, driver.Errorf(driver.InvalidArgument, "postgres push-tx: task %d of %d is nil", i+1, len(tasks))
		}
		body, err := jobq.MarshalTask(t)
		if err != nil {
			return nil, fmt.Errorf("postgres push-tx: task %d of %d: %w", i+1, len(tasks), err)
		}
		msgs[i] = &driver.Message{ID: t.ID, Body: body, Priority: t.Priority, NotBefore: t.NotBefore,
			ConcurrencyKey: t.ConcurrencyKey, RateLimitKey: t.RateLimitKey}
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	// Always notify: the notification only leaves at commit, and Postgres
	// folds identical notifications of one transaction into one.
	res, err := d.pushBounded(ctx, tx, msgs, true)
	if err != nil {
		return nil, wrap(ctx, "push-tx", err)
	}
	out := make([]jobq.PushResult, len(res))
	for i, r := range res {
		out[i] = jobq.PushResult{ID: msgs[i].ID, MessageID: r.MessageID, Duplicate: r.Duplicate}
	}
	return out, nil
}
