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

// A heartbeat is stored on the database's clock: the record's write time
// (now()) less how long before the write the worker stamped it ($3, by
// its own clock), so that workers and listers whose clocks are off from
// each other's agree on how long a worker has been silent. Spans ($2,
// microseconds) turn the caller's times into the database's.
const (
	upsertWorkerSQL = `INSERT INTO {{s}}.workers (queue, id, heartbeat, withdrawn, data)
VALUES ($1, $2, now() - $3::bigint * interval '1 microsecond', $4, $5)
ON CONFLICT (queue, id) DO UPDATE SET heartbeat = excluded.heartbeat, withdrawn = excluded.withdrawn, data = excluded.data`
	listWorkersSQL = `SELECT id, (extract(epoch FROM now() - heartbeat) * 1e6)::bigint, withdrawn, data FROM {{s}}.workers
WHERE queue = $1 AND heartbeat >= now() - $2::bigint * interval '1 microsecond'`
	purgeWorkersSQL = `DELETE FROM {{s}}.workers WHERE queue = $1 AND heartbeat < now() - $2::bigint * interval '1 microsecond'`
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
	_, err := d.pool.Exec(ctx, d.workerSQL(upsertWorkerSQL), d.cfg.queue, rec.ID, micros(d.now().Sub(rec.Heartbeat)), rec.Withdrawn, rec.Data)
	return wrap(ctx, "put worker", err)
}

// ListWorkers implements driver.WorkerStore.
func (d *Driver) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	now := d.now()
	rows, err := d.pool.Query(ctx, d.workerSQL(listWorkersSQL), d.cfg.queue, micros(now.Sub(since)))
	if err != nil {
		return nil, wrap(ctx, "list workers", err)
	}
	defer rows.Close()
	var out []*driver.WorkerRecord
	for rows.Next() {
		r := &driver.WorkerRecord{}
		var age int64
		if err := rows.Scan(&r.ID, &age, &r.Withdrawn, &r.Data); err != nil {
			return nil, wrap(ctx, "list workers", err)
		}
		r.Heartbeat = now.Add(-time.Duration(age) * time.Microsecond).UTC()
		out = append(out, r)
	}
	return out, wrap(ctx, "list workers", rows.Err())
}

// PurgeWorkers implements driver.WorkerStore.
func (d *Driver) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	tag, err := d.pool.Exec(ctx, d.workerSQL(purgeWorkersSQL), d.cfg.queue, micros(d.now().Sub(before)))
	if err != nil {
		return 0, wrap(ctx, "purge workers", err)
	}
	return tag.RowsAffected(), nil
}
