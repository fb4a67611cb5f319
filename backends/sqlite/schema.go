package sqlite

import (
	"context"
	"database/sql"
	"os"
)

// schema creates the tables every queue in a file shares. Times are Unix
// microseconds. A message is
//
//   - ready when visible_at <= now (whether or not an old lease is recorded:
//     an expired lease is claimable again),
//   - in flight when lease is set and visible_at > now (visible_at is then
//     the lease's expiry),
//   - delayed when lease is NULL and visible_at > now.
//
// jobq_messages_order serves claims (priority first, then push order, with
// visible_at and lease in the index so that filters and counts need no table
// lookups; a claim changes both columns in the same entry, so carrying them
// costs no extra page writes);
// dedup by task ID is jobq_task_keys' (keys.go), not an index of this
// table's. There is deliberately no index on visible_at alone: every claim
// changes visible_at, and each extra index it lives in costs a page write
// per claim, a large share of the receive cost. Idle polls
// use PRAGMA data_version instead (see idle.go).
const schema = `
CREATE TABLE IF NOT EXISTS jobq_messages (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	queue       TEXT    NOT NULL,
	task_id     TEXT    NOT NULL,
	body        BLOB    NOT NULL,
	priority    INTEGER NOT NULL DEFAULT 0,
	visible_at  INTEGER NOT NULL,
	enqueued_at INTEGER NOT NULL,
	deliveries  INTEGER NOT NULL DEFAULT 0,
	lease       TEXT
);
CREATE INDEX IF NOT EXISTS jobq_messages_order ON jobq_messages (queue, priority DESC, id, visible_at, lease);
DROP INDEX IF EXISTS jobq_messages_visible; -- made by early development builds
DROP INDEX IF EXISTS jobq_messages_claim;   -- made by early development builds
CREATE TABLE IF NOT EXISTS jobq_dead (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	queue       TEXT    NOT NULL,
	task_id     TEXT    NOT NULL,
	body        BLOB    NOT NULL,
	priority    INTEGER NOT NULL DEFAULT 0,
	enqueued_at INTEGER NOT NULL,
	deliveries  INTEGER NOT NULL,
	reason      TEXT    NOT NULL,
	detail      TEXT    NOT NULL,
	dead_at     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS jobq_dead_queue ON jobq_dead (queue, id);
`

// migrate creates the tables if they are missing. It runs in one immediate
// transaction so that processes opening a new file at once do not race.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return err
	}
	if err := migratePolicies(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, resultTable+rollupTable); err != nil {
		return err
	}
	if err := migrateWorkers(ctx, tx); err != nil {
		return err
	}
	if err := migrateTrace(ctx, tx); err != nil {
		return err
	}
	if err := migrateTaskKeys(ctx, tx); err != nil {
		return err
	}
	if err := migrateGroups(ctx, tx); err != nil {
		return err
	}
	if err := migrateHeld(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, resultIndex+resultPurgeTable); err != nil {
		return err
	}
	return tx.Commit()
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
