package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// PushTx implements driver.TxPusher: jobq.Queue.PushTx validates and encodes
// the tasks, and this stores them through tx, which must be a pgx.Tx on the
// database that holds the queue's schema. The messages become visible to
// receivers when it commits (the wake-up notification is delivered at
// commit too) and vanish if it rolls back. On a queue with a max-depth policy
// the push takes the queue's depth lock, held until the transaction ends
// (other pushes to the queue wait for it), and a push that would overflow
// fails with ResourceExhausted, undone through a savepoint so that the
// transaction stays usable.
func (d *Driver) PushTx(ctx context.Context, tx any, msgs []*driver.Message) ([]driver.PushResult, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	ptx, ok := tx.(pgx.Tx)
	if !ok || ptx == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "postgres push-tx: the transaction is a %T; pass the pgx.Tx of a transaction on the queue's database", tx)
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	// Always notify, this process's handle too: the notification only
	// leaves at commit, which the driver does not see, and Postgres folds
	// identical notifications of one transaction into one.
	_, maxDepth, err := d.currentPolicies(ctx)
	if err != nil {
		return nil, wrap(ctx, "push-tx", err)
	}
	res, err := d.pushBounded(ctx, ptx, msgs, pushWake{inline: true}, maxDepth)
	if err != nil {
		return nil, wrap(ctx, "push-tx", err)
	}
	return res, nil
}
