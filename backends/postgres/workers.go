package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// workerMigration is the schema step that adds the worker registry
// (driver.WorkerStore): one row per worker of a queue, replaced at every
// heartbeat; the index serves listings and purges by heartbeat.
const workerMigration = `
CREATE TABLE {{s}}.workers (
	queue     text COLLATE "C" NOT NULL,
	id        text COLLATE "C" NOT NULL,
	heartbeat timestamptz NOT NULL,
	withdrawn boolean NOT NULL DEFAULT false,
	data      bytea NOT NULL,
	PRIMARY KEY (queue, id)
);
CREATE INDEX workers_heartbeat ON {{s}}.workers (queue, heartbeat);
`

const (
	upsertWorkerSQL = `INSERT INTO {{s}}.workers (queue, id, heartbeat, withdrawn, data) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (queue, id) DO UPDATE SET heartbeat = excluded.heartbeat, withdrawn = excluded.withdrawn, data = excluded.data`
	listWorkersSQL  = `SELECT id, heartbeat, withdrawn, data FROM {{s}}.workers WHERE queue = $1 AND heartbeat >= $2`
	purgeWorkersSQL = `DELETE FROM {{s}}.workers WHERE queue = $1 AND heartbeat < $2`
)

var _ driver.WorkerStore = (*Driver)(nil)

// workerSQL fills the schema name into one of the statements above.
func (d *Driver) workerSQL(q string) string {
	return strings.ReplaceAll(q, "{{s}}", pgx.Identifier{d.cfg.schema}.Sanitize())
}

// PutWorker implements driver.WorkerStore.
func (d *Driver) PutWorker(ctx context.Context, rec *driver.WorkerRecord) error {
	if err := d.closing.Err(); err != nil {
		return err
	}
	_, err := d.pool.Exec(ctx, d.workerSQL(upsertWorkerSQL), d.cfg.queue, rec.ID, rec.Heartbeat, rec.Withdrawn, rec.Data)
	return wrap(ctx, "put worker", err)
}

// ListWorkers implements driver.WorkerStore.
func (d *Driver) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, d.workerSQL(listWorkersSQL), d.cfg.queue, since)
	if err != nil {
		return nil, wrap(ctx, "list workers", err)
	}
	defer rows.Close()
	var out []*driver.WorkerRecord
	for rows.Next() {
		r := &driver.WorkerRecord{}
		if err := rows.Scan(&r.ID, &r.Heartbeat, &r.Withdrawn, &r.Data); err != nil {
			return nil, wrap(ctx, "list workers", err)
		}
		r.Heartbeat = r.Heartbeat.UTC()
		out = append(out, r)
	}
	return out, wrap(ctx, "list workers", rows.Err())
}

// PurgeWorkers implements driver.WorkerStore.
func (d *Driver) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	tag, err := d.pool.Exec(ctx, d.workerSQL(purgeWorkersSQL), d.cfg.queue, before)
	if err != nil {
		return 0, wrap(ctx, "purge workers", err)
	}
	return tag.RowsAffected(), nil
}
