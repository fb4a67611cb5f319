package sqlite

import (
	"context"
	"database/sql"
)

// Dedup by task ID (schema 2). jobq_task_keys maps a queue's task ID (its
// key, as taskkey.go stores it) to the message last pushed with it. A key
// is a duplicate only while the message it names still exists: message
// IDs are AUTOINCREMENT, never reused, so a key whose message is gone is
// stale and the next push of that ID overwrites it. Completing, dead-
// lettering, removing or clearing a message leaves its key alone.
//
// Why: task IDs are random (MD5s of the content), so a unique index on
// them put every queued task on its own page; deleting a message from it
// rewrote one random page per completed task (about 10 KB of WAL and
// checkpoint writes each at a million queued tasks), which halved the
// drain rate of a deep queue. Now a drain writes only at the head of the
// messages table, and stale keys are deleted in bulk by sweeps, where each
// page changed holds many of them.
//
// Two triggers keep the keys for every insert into jobq_messages, so that
// no path that adds a message (a push, a dead-letter requeue, another
// tool) can miss them: jobq_messages_dedup skips the insert (RAISE(IGNORE):
// no row, no error) while the task ID's key names a message that exists,
// and jobq_messages_key records the new message's key. The test and the
// insert run in one write transaction (SQLite has one writer), so they
// cannot race.
const keySchema = `
CREATE TABLE IF NOT EXISTS jobq_task_keys (
	queue      TEXT    NOT NULL,
	task_id    BLOB    NOT NULL,
	message_id INTEGER NOT NULL,
	PRIMARY KEY (queue, task_id)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS jobq_messages_dedup BEFORE INSERT ON jobq_messages
WHEN NEW.task_id <> '' AND EXISTS (SELECT 1 FROM jobq_task_keys k JOIN jobq_messages m ON m.id = k.message_id
	WHERE k.queue = NEW.queue AND k.task_id = NEW.task_id)
BEGIN SELECT RAISE(IGNORE); END;
CREATE TRIGGER IF NOT EXISTS jobq_messages_key AFTER INSERT ON jobq_messages
WHEN NEW.task_id <> ''
BEGIN
	INSERT INTO jobq_task_keys (queue, task_id, message_id) VALUES (NEW.queue, NEW.task_id, NEW.id)
	ON CONFLICT (queue, task_id) DO UPDATE SET message_id = excluded.message_id;
END;
CREATE TABLE IF NOT EXISTS jobq_key_sweeps (
	queue     TEXT    NOT NULL PRIMARY KEY,
	seq       INTEGER NOT NULL,
	keys      INTEGER NOT NULL,
	at        BLOB,
	run_seq   INTEGER NOT NULL DEFAULT 0,
	run_exact INTEGER NOT NULL DEFAULT 0,
	run_kept  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
`

// keyMessage is the message a key names (a live one, when
// jobq_messages_dedup skipped an insert).
const keyMessage = `SELECT message_id FROM jobq_task_keys WHERE queue = ? AND task_id = ?`

// Sweeps. jobq_key_sweeps holds per queue the message sequence
// (sqlite_sequence) when the last finished sweep began (seq) and the keys
// it left (keys); while a sweep runs, at is the last key it has passed
// (NULL otherwise), run_seq the sequence when it began, run_exact the
// message IDs up to which it looks each message up, and run_kept the keys
// it kept so far.
//
// A sweep walks the queue's keys in key order, sweepChunk at a time, each
// chunk in a write transaction that is open anyway (a push's) or in a
// short one of its own (an idle receiver's, vacuum.go). A key is stale for
// certain when its message ID is below the smallest in jobq_messages; an
// exact sweep also looks up the others it reaches. A sweep starts
//
//   - on a push, when at least max(keys/2, sweepFloor) message IDs below
//     the smallest live one were issued since the last sweep began (most
//     of the keys added since are stale for certain): a cheap sweep;
//   - on a push, when max(4*keys, sweepFloor) messages were pushed since
//     (the key table may have grown fivefold with stale keys that the
//     cheap test misses, say behind a long-delayed message): an exact
//     sweep, about one lookup per key pushed;
//   - on an idle receiver, when anything was pushed since and either a
//     message ID below the smallest live one was issued since (cheap) or
//     more than keys/8 messages were pushed (exact), so that a drained
//     queue gives its keys back.
//
// An exact sweep whose first chunk (keys in random order, task IDs being
// random) finds less than a quarter of its keys stale stops there, as if
// it had run to the end: a queue that only grew is not looked up key by
// key. So the key table stays within a few times the queue's live keys
// plus sweepFloor, and a sweep costs a few key reads per task pushed.
const (
	sweepFloor = 100_000
	// sweepCheckEvery is how many pushed messages a driver lets pass
	// between looks at whether a sweep is due (one small query).
	sweepCheckEvery = 1000
	// sweepChunkIdle is the keys an idle receiver sweeps per step.
	sweepChunkIdle = 8192
	// sweepChunkMin is the least a push sweeps of a running sweep; it
	// sweeps 4 keys per message it added when that is more.
	sweepChunkMin = 1024
)

const (
	sweepState = `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobq_messages'), 0),
		(SELECT min(id) FROM jobq_messages),
		COALESCE(s.seq, 0), COALESCE(s.keys, 0), s.at, COALESCE(s.run_seq, 0), COALESCE(s.run_exact, 0), COALESCE(s.run_kept, 0)
		FROM (SELECT 1) LEFT JOIN jobq_key_sweeps s ON s.queue = ?`
	// sweepRange is how many keys the next chunk holds and where it ends.
	sweepRange = `SELECT count(*), max(task_id) FROM (SELECT task_id FROM jobq_task_keys
		WHERE queue = ?1 AND task_id > ?2 ORDER BY task_id LIMIT ?3)`
	sweepDelete = `DELETE FROM jobq_task_keys WHERE queue = ?1 AND task_id > ?2 AND task_id <= ?3
		AND (message_id < ?4 OR (message_id <= ?5 AND NOT EXISTS (SELECT 1 FROM jobq_messages WHERE id = jobq_task_keys.message_id)))`
	saveSweep = `INSERT INTO jobq_key_sweeps (queue, seq, keys, at, run_seq, run_exact, run_kept)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
		ON CONFLICT (queue) DO UPDATE SET seq = excluded.seq, keys = excluded.keys, at = excluded.at,
			run_seq = excluded.run_seq, run_exact = excluded.run_exact, run_kept = excluded.run_kept`
)

// sweepStart is the cursor of a sweep that has passed no key yet: an
// integer sorts before every TEXT and BLOB key.
const sweepStart int64 = -1

// sweep is a queue's sweep state with the file's message sequence.
type sweep struct {
	seq      int64         // sqlite_sequence of jobq_messages now
	minLive  sql.NullInt64 // the smallest message ID in the file
	lastSeq  int64         // seq when the last finished sweep began
	keys     int64         // keys it left
	at       any           // the running sweep's cursor; nil when none runs
	runSeq   int64
	runExact int64
	runKept  int64
}

// readSweep reads the queue's sweep state; q is a query runner (a write
// transaction or the idle connection).
func readSweep(q func(query string, args ...any) *sql.Row, queue string) (sweep, error) {
	var s sweep
	err := q(sweepState, queue).Scan(&s.seq, &s.minLive, &s.lastSeq, &s.keys, &s.at, &s.runSeq, &s.runExact, &s.runKept)
	return s, err
}

// live is the smallest message ID that may exist: every key naming a
// smaller one is stale.
func (s sweep) live() int64 {
	if s.minLive.Valid {
		return s.minLive.Int64
	}
	return s.seq + 1
}

// due reports whether a sweep should start, and whether it is exact (see
// the list above); idle is an idle receiver's look.
func (s sweep) due(idle bool) (start, exact bool) {
	pushed := s.seq - s.lastSeq
	gone := min(s.live()-1, s.seq) - s.lastSeq // IDs issued since and gone for certain
	if idle {
		if pushed <= 0 {
			return false, false
		}
		exact = pushed > s.keys/8
		return exact || gone > 0, exact
	}
	if pushed >= max(4*s.keys, sweepFloor) {
		return true, true
	}
	return gone >= max(s.keys/2, sweepFloor), false
}

// sweepKeys starts a due sweep of the queue's keys or continues the
// running one by up to chunk keys, in tx. It reports whether a sweep is
// still running.
func (d *Driver) sweepKeys(tx wtx, chunk int, idle bool) (bool, error) {
	s, err := readSweep(tx.QueryRow, d.cfg.queue)
	if err != nil {
		return false, err
	}
	if s.at == nil {
		start, exact := s.due(idle)
		if !start {
			return false, nil
		}
		s.at, s.runSeq, s.runExact, s.runKept = sweepStart, s.seq, 0, 0
		if exact {
			s.runExact = s.seq
		}
	}
	var n int64
	var end any
	if err := tx.QueryRow(sweepRange, d.cfg.queue, s.at, chunk).Scan(&n, &end); err != nil {
		return false, err
	}
	if n > 0 {
		res, err := tx.Exec(sweepDelete, d.cfg.queue, s.at, end, s.live(), s.runExact)
		if err != nil {
			return false, err
		}
		deleted, err := res.RowsAffected()
		if err != nil {
			return false, err
		}
		if s.runExact > 0 && s.at == sweepStart && 4*deleted < n {
			// Few stale keys: stop; the keys left are at most those
			// before plus those pushed since.
			_, err := tx.Exec(saveSweep, d.cfg.queue, s.runSeq, s.keys+s.runSeq-s.lastSeq, nil, 0, 0, 0)
			return false, err
		}
		s.runKept += n - deleted
		s.at = end
	}
	if n == int64(chunk) {
		_, err := tx.Exec(saveSweep, d.cfg.queue, s.lastSeq, s.keys, s.at, s.runSeq, s.runExact, s.runKept)
		return true, err
	}
	_, err = tx.Exec(saveSweep, d.cfg.queue, s.runSeq, s.runKept, nil, 0, 0, 0)
	return false, err
}

// sweepOnPush runs sweepKeys after a push transaction that added added
// messages: a chunk of a running sweep, or, every sweepCheckEvery pushed
// messages, a look at whether one is due.
func (d *Driver) sweepOnPush(tx wtx, added int) error {
	d.keys.pushed += added
	if !d.keys.running && d.keys.pushed < sweepCheckEvery {
		return nil
	}
	d.keys.pushed = 0
	running, err := d.sweepKeys(tx, max(4*added, sweepChunkMin), false)
	d.keys.running = running
	return err
}

// keySweeps is a driver's sweep bookkeeping, used only by the holder of
// writeSem.
type keySweeps struct {
	pushed  int  // messages pushed since the last look
	running bool // a sweep was running at the last look
}

// needsSweep reports whether an idle receiver should run a sweep step:
// one is running or due. Once it found none, it answers no for the cost
// of one PRAGMA data_version until another connection commits.
func (w *idleWatch) needsSweep(ctx context.Context, queue string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	var v int64
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return false
	}
	if w.noSweep && v == w.noSweepVersion {
		return false
	}
	s, err := readSweep(func(q string, args ...any) *sql.Row { return w.conn.QueryRowContext(ctx, q, args...) }, queue)
	if err != nil {
		return false
	}
	start, _ := s.due(true)
	need := s.at != nil || start
	w.noSweep, w.noSweepVersion = !need, v
	return need
}
