package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/taskkey"
)

// How a message's task ID and body are stored. jobq's default task ID (and
// ai4s-jobq's) is an MD5 in 32 lowercase hex digits, and ai4s-jobq's wire
// JSON carries it in the body as well. Such a canonical ID is stored as its
// 16 bytes in task_id (a BLOB), which halves its entry in the dedup index
// jobq_messages_task; any other ID is stored as TEXT, as it is. Text and
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
// 2*tokenBytes (24) hex digits. Versions before schemaVersion 1 know neither: the
// triggers of fenceSchema make their pushes, dead-letter requeues and
// claims fail with fenceMessage instead of writing rows they cannot read
// or reading rows they would garble.

// schemaVersion is the layout this code writes, recorded in the file's
// user_version. A file with a higher one was written by a newer jobq and
// is refused.
const schemaVersion = 1

// fenceMessage is the error a jobq older than schemaVersion 1 gets when it
// writes to an upgraded file.
const fenceMessage = `jobq: this SQLite file has been upgraded to jobq schema 1 (compact task IDs) by a newer jobq; upgrade this program (every process using the file must run a version that knows schema 1)`

// fenceSchema holds the triggers that stop older versions (see above).
// Old pushes and dead-letter requeues insert rows without id_at; old
// claims write 32-digit lease tokens.
const fenceSchema = `
CREATE TRIGGER IF NOT EXISTS jobq_messages_fence_insert BEFORE INSERT ON jobq_messages
WHEN NEW.id_at IS NULL
BEGIN SELECT RAISE(ABORT, '` + fenceMessage + `'); END;
CREATE TRIGGER IF NOT EXISTS jobq_messages_fence_claim BEFORE UPDATE OF lease ON jobq_messages
WHEN length(NEW.lease) = 32
BEGIN SELECT RAISE(ABORT, '` + fenceMessage + `'); END;
`

// canonicalID reports whether id is 32 lowercase hex digits.
func canonicalID(id string) bool { return taskkey.Canonical(id) }

// canonicalSQL is canonicalID in SQL: whether the SQL expression x is a
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
	if !canonicalID(id) {
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
	if at < 0 || at-1 > int64(len(b)) || !canonicalID(id) {
		return id, b, fmt.Sprintf("its ID position (id_at column) %d does not fit its %d-byte body and task ID %q", at, len(b), id)
	}
	full := make([]byte, 0, len(b)+len(id))
	full = append(append(append(full, b[:at-1]...), id...), b[at-1:]...)
	return id, full, ""
}

// convertStep is how many rowids one statement of convertKeys covers. A
// statement that changes rows of a table with a unique index keeps a
// journal of every page it changes, in memory (temp_store): one UPDATE of
// a million rows took 700 MB.
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

// migrateTaskKeys brings a file to schemaVersion: it adds the id_at
// columns, stores the canonical task IDs of older rows as keys (their
// bodies stay whole), and installs the fence against older versions. It
// refuses a file of a newer schema. It runs inside migrate's transaction;
// converting a file's rows holds the write lock for about 25 seconds per
// million queued messages (measured: 26.6 s, 296 MB of memory).
func migrateTaskKeys(ctx context.Context, tx *sql.Tx) error {
	var v int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if v > schemaVersion {
		return driver.Errorf(driver.FailedPrecondition,
			"sqlite: the file has jobq schema %d (user_version), written by a newer jobq; this program knows schema %d: upgrade it", v, schemaVersion)
	}
	if v == schemaVersion {
		return nil
	}
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
	if _, err := tx.ExecContext(ctx, fenceSchema); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion))
	return err
}
