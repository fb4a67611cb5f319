package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/jobq/jobq/driver"
)

// The worker registry (driver.WorkerStore): one row per worker of a queue,
// replaced at every heartbeat. Times are Unix microseconds.
const workerSchema = `
CREATE TABLE IF NOT EXISTS jobq_workers (
	queue     TEXT    NOT NULL,
	id        TEXT    NOT NULL,
	heartbeat INTEGER NOT NULL,
	withdrawn INTEGER NOT NULL DEFAULT 0,
	data      BLOB    NOT NULL,
	PRIMARY KEY (queue, id)
);
`

const (
	upsertWorker = `INSERT INTO jobq_workers (queue, id, heartbeat, withdrawn, data) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (queue, id) DO UPDATE SET heartbeat = excluded.heartbeat, withdrawn = excluded.withdrawn, data = excluded.data`
	selectWorkers = `SELECT id, heartbeat, withdrawn, data FROM jobq_workers WHERE queue = ? AND heartbeat >= ?`
	purgeWorkers  = `DELETE FROM jobq_workers WHERE queue = ? AND heartbeat < ?`
)

// migrateWorkers creates the registry table. It runs inside migrate's
// transaction.
func migrateWorkers(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, workerSchema)
	return err
}

var _ driver.WorkerStore = (*Driver)(nil)

// PutWorker implements driver.WorkerStore.
func (d *Driver) PutWorker(ctx context.Context, rec *driver.WorkerRecord) error {
	withdrawn := 0
	if rec.Withdrawn {
		withdrawn = 1
	}
	return d.writeTx(ctx, "worker put", func(tx wtx) error {
		_, err := tx.Exec(upsertWorker, d.cfg.queue, rec.ID, micros(rec.Heartbeat), withdrawn, rec.Data)
		return err
	})
}

// ListWorkers implements driver.WorkerStore.
func (d *Driver) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	rows, err := d.db.QueryContext(ctx, selectWorkers, d.cfg.queue, micros(since))
	if err != nil {
		return nil, d.wrap(ctx, "worker list", err)
	}
	defer rows.Close()
	var out []*driver.WorkerRecord
	for rows.Next() {
		var (
			r  driver.WorkerRecord
			hb int64
			wd int
		)
		if err := rows.Scan(&r.ID, &hb, &wd, &r.Data); err != nil {
			return nil, d.wrap(ctx, "worker list", err)
		}
		r.Heartbeat, r.Withdrawn = fromMicros(hb).UTC(), wd != 0
		out = append(out, &r)
	}
	return out, d.wrap(ctx, "worker list", rows.Err())
}

// PurgeWorkers implements driver.WorkerStore.
func (d *Driver) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := d.writeTx(ctx, "worker purge", func(tx wtx) error {
		res, err := tx.Exec(purgeWorkers, d.cfg.queue, micros(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
