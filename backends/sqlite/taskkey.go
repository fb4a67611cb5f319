package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/taskkey"
)

// How a message's task ID and body are stored. jobq's default task ID (and
// ai4s-jobq's) is an MD5 in 32 lowercase hex digits, and ai4s-jobq's wire
// JSON carries it in the body as well. Such a canonical ID is stored as its
// 16 bytes in task_id (a BLOB), which halves its entry in the dedup table
// jobq_task_keys; any other ID is stored as TEXT, as it is. Text and
// BLOB values never compare equal, and an ID is canonical or not by its
// spelling alone, so each ID has exactly one key and dedup is unchanged.
//
// When the body holds the canonical ID's digits, they are cut out of the
// stored body, and id_at is one more than the byte offset they were cut
// from; reading puts them back, so the body comes back byte for byte.
// id_at is 0 when nothing was cut (SQLite stores 0 in the record header
// alone). Together that is about 60 bytes less per queued task.
//
// id_at is never NULL in a row jobq writes, and every lease token is
// 2*tokenBytes (28) hex digits. Schema 2 moved dedup from a unique index
// to jobq_task_keys (keys.go). Older versions know neither: the triggers
// of fenceSchema make their claims, and their pushes and dead-letter
// requeues before schema 1, fail with fenceMessage instead of writing rows
// they cannot read or reading rows they would garble. The pushes and
// dead-letter requeues of schema 1 name the dropped unique index in their
// ON CONFLICT clause, so SQLite refuses them before any trigger runs
// ("ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE
// constraint"); nothing is written either way. Schema 3 keeps result
// records in generations (results.go); the record writes of older versions
// name the old key (queue, task_id) in their ON CONFLICT clause and are
// refused the same way, with the settlement they belong to, so the claims
// of schema 2 (26-digit tokens) are fenced too: a process of schema 2 still
// running on an upgraded file would otherwise run tasks it cannot settle.
// Schema 4 drops the records' expiry index (purge.go): a process of schema
// 3 still running on an upgraded file settles and records as before, and
// its purges fail (they name the index), so they delete nothing. The
// versions that know user_version refuse an upgraded file whole when they
// open it.

// schemaVersion is the layout this code writes, recorded in the file's
// user_version. A file with a higher one was written by a newer jobq and
// is refused.
const schemaVersion = 4

// fenceMessage is the error an older jobq gets when it writes to an
// upgraded file.
const fenceMessage = `jobq: this SQLite file has been upgraded to jobq schema 4 (compact task IDs, lazy dedup keys, result generations, no record expiry index) by a newer jobq; upgrade this program (every process using the file must run a version that knows schema 4)`

// fenceSchema holds the triggers that stop older versions (see above).
// Pushes and dead-letter requeues before schema 1 insert rows without
// id_at; claims before schema 1 write 32-digit lease tokens, those of
// schema 1 24-digit ones, those of schema 2 26-digit ones.
const fenceSchema = `
DROP TRIGGER IF EXISTS jobq_messages_fence_insert;
CREATE TRIGGER jobq_messages_fence_insert BEFORE INSERT ON jobq_messages
WHEN NEW.id_at IS NULL
BEGIN SELECT RAISE(ABORT, '` + fenceMessage + `'); END;
DROP TRIGGER IF EXISTS jobq_messages_fence_claim;
CREATE TRIGGER jobq_messages_fence_claim BEFORE UPDATE OF lease ON jobq_messages
WHEN length(NEW.lease) IN (24, 26, 32)
BEGIN SELECT RAISE(ABORT, '` + fenceMessage + `'); END;
`

// canonicalSQL is taskkey.Canonical in SQL: whether the SQL expression x is a
// TEXT of 32 lowercase hex digits.
func canonicalSQL(x string) string {
	return fmt.Sprintf(`(typeof(%[1]s) = 'text' AND length(%[1]s) = 32 AND %[1]s NOT GLOB '*[^0-9a-f]*')`, x)
}

// keyColumnSQL is a row's task_id as a valid key, for statements that copy
// rows another tool may have written: a key stays, a canonical ID stored
// as text becomes its key, anything else becomes text.
var keyColumnSQL = `CASE WHEN typeof(task_id) = 'blob' AND length(task_id) = 16 THEN task_id
	WHEN ` + canonicalSQL("task_id") + ` THEN unhex(task_id) ELSE CAST(task_id AS TEXT) END`

// taskKey is the task_id column value for id.
func taskKey(id string) any {
	if !taskkey.Canonical(id) {
		return id
	}
	b, _ := hex.DecodeString(id) // canonical: cannot fail
	return b
}

// storedTask is a message's task ID and body as its columns store them.
type storedTask struct {
	key  any    // task_id
	body []byte // body, with the ID's digits cut out when idAt > 0
	idAt int64  // id_at
}

// storeTask returns how id and body are stored.
func storeTask(id string, body []byte) storedTask {
	key := taskKey(id)
	if _, ok := key.([]byte); !ok {
		return storedTask{key: key, body: nonNil(body)}
	}
	at := bytes.Index(body, []byte(id))
	if at < 0 {
		return storedTask{key: key, body: nonNil(body)}
	}
	cut := make([]byte, 0, len(body)-len(id))
	cut = append(append(cut, body[:at]...), body[at+len(id):]...)
	return storedTask{key: key, body: cut, idAt: int64(at) + 1}
}

// loadTask reads the task_id, body and id_at columns of a row, which
// another tool may have written with any type, back into the task ID and
// the body as pushed. why says what is damaged ("" when nothing is); the ID
// and body are then the best reading there is.
func loadTask(key, body, idAt any) (id string, b []byte, why string) {
	switch v := key.(type) {
	case string:
		id = v
	case []byte:
		if len(v) == 16 {
			id = hex.EncodeToString(v)
		} else {
			id = string(v)
		}
	case nil:
	default:
		id = fmt.Sprint(v)
	}
	switch v := body.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		return id, nil, fmt.Sprintf("its body is %s, not bytes", sqlValue(body))
	}
	var at int64
	switch v := idAt.(type) {
	case nil:
	case int64:
		at = v
	default:
		return id, b, fmt.Sprintf("its ID position (id_at column) is %s, not an integer", sqlValue(idAt))
	}
	if at == 0 {
		return id, b, ""
	}
	if at < 0 || at-1 > int64(len(b)) || !taskkey.Canonical(id) {
		return id, b, fmt.Sprintf("its ID position (id_at column) %d does not fit its %d-byte body and task ID %q", at, len(b), id)
	}
	full := make([]byte, 0, len(b)+len(id))
	full = append(append(append(full, b[:at-1]...), id...), b[at-1:]...)
	return id, full, ""
}

// convertStep is how many rowids one statement of convertKeys covers. A
// statement that changes rows of a table with a unique index keeps a
// journal of every page it changes, in memory (temp_store): one UPDATE of
// a million rows took 700 MB (schema 2 drops the index first, but
// jobq_dead's rows are still converted, and another tool's index may
// remain).
const convertStep = 10000

// convertKeys stores the canonical task IDs of table's rows as keys, in
// statements of convertStep rowids.
func convertKeys(ctx context.Context, tx *sql.Tx, table string) error {
	var lo, hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(rowid), max(rowid) FROM `+table).Scan(&lo, &hi); err != nil {
		return err
	}
	for at := lo.Int64; lo.Valid && at <= hi.Int64; at += convertStep {
		if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET task_id = unhex(task_id)
			WHERE rowid >= ? AND rowid < ? AND `+canonicalSQL("task_id"), at, at+convertStep); err != nil {
			return err
		}
	}
	return nil
}

// fillKeys records the key of every queued message in jobq_task_keys, in
// one statement that sorts them first, so that the table is written in
// order, and starts each queue's sweep bookkeeping (keys.go) at it.
const fillKeys = `
INSERT OR REPLACE INTO jobq_task_keys (queue, task_id, message_id)
	SELECT queue, task_id, id FROM jobq_messages WHERE task_id <> '' ORDER BY queue, task_id;
INSERT OR REPLACE INTO jobq_key_sweeps (queue, seq, keys)
	SELECT queue, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobq_messages'), 0), count(*)
	FROM jobq_task_keys GROUP BY queue;
`

// migrateTaskKeys brings a file to schemaVersion: schema 1 adds the id_at
// columns and stores the canonical task IDs of older rows as keys (their
// bodies stay whole); schema 2 drops the unique index jobq_messages_task
// and records the keys in jobq_task_keys instead; schema 3 copies the
// result records into generations (migrateResults); schema 4 drops their
// expiry index (migratePurge); each installs the fence against older
// versions. It refuses a file of a newer schema. It
// runs inside migrate's transaction, so an upgrade cut short leaves the
// file as it was; it holds the write lock meanwhile, for seconds per
// million queued messages or result records (docs/backends/sqlite.md,
// "Upgrading").
func migrateTaskKeys(ctx context.Context, tx *sql.Tx) error {
	var v int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if err := checkNotNewer(v); err != nil {
		return err
	}
	if v == schemaVersion {
		return nil
	}
	if v < 2 {
		// Dropped first, so that converting the keys does not rewrite it.
		if _, err := tx.ExecContext(ctx, `DROP INDEX IF EXISTS jobq_messages_task`); err != nil {
			return err
		}
		if v < 1 {
			if err := migrateIDAt(ctx, tx); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, keySchema+fillKeys); err != nil {
			return err
		}
	}
	if err := migrateResults(ctx, tx); err != nil {
		return err
	}
	if err := migratePurge(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fenceSchema); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion))
	return err
}

// checkNotNewer refuses a file whose layout v (its user_version) is newer
// than schemaVersion: this code would misread or corrupt it.
func checkNotNewer(v int) error {
	if v > schemaVersion {
		return driver.Errorf(errcode.FailedPrecondition,
			"sqlite: the file has jobq schema %d (user_version), written by a newer jobq; this program knows schema %d: upgrade it", v, schemaVersion)
	}
	return nil
}

// migrateIDAt is schema 1's step: the id_at columns, and the canonical
// task IDs of older rows stored as keys.
func migrateIDAt(ctx context.Context, tx *sql.Tx) error {
	for _, table := range []string{"jobq_messages", "jobq_dead"} {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = 'id_at'`, table).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN id_at INTEGER`); err != nil {
				return err
			}
		}
		if err := convertKeys(ctx, tx, table); err != nil {
			return err
		}
	}
	return nil
}
