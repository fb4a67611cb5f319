package postgres

// TxPusher pushes tasks inside the application's own transaction: they
// become visible when the transaction commits, and vanish with it if it
// rolls back. Reach it through the queue's escape hatch:
//
//	var txp postgres.TxPusher
//	if q.As(&txp) {
//		res, err := txp.PushTx(ctx, tx, task)
//	}
type TxPusher interface {
	placeholderTxPusher()
}

func (d *pgDriver) placeholderTxPusher() {}
