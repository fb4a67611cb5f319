package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
)

const (
	// listDead casts each column to the type it is scanned into, so that
	// a row another tool wrote cannot fail the listing; the task ID and
	// body are read by loadTask.
	listDead = `SELECT id, task_id, body, id_at, CAST(reason AS TEXT), CAST(detail AS TEXT),
		CAST(deliveries AS INTEGER), CAST(dead_at AS INTEGER)
		FROM jobq_dead WHERE queue = ? ORDER BY id LIMIT ?`
	deadIDs       = `SELECT id FROM jobq_dead WHERE queue = ? AND id > ? AND id <= ? ORDER BY id LIMIT ?`
	lastDeadID    = `SELECT max(id) FROM jobq_dead WHERE queue = ?`
	deleteDead    = `DELETE FROM jobq_dead WHERE id = ? AND queue = ?`
	deleteAllDead = `DELETE FROM jobq_dead WHERE queue = ?`
)

var (
	// reviveDead puts a dead letter back, visible at once, with a fresh
	// delivery count; it is skipped (no row) when a message with the same
	// task ID is queued again meanwhile (the trigger jobq_messages_dedup,
	// keys.go), and the dead letter then merges into that message.
	// A priority or enqueue time that is not one (another tool wrote it)
	// is repaired on the way, so that the claim does not quarantine the
	// message again: priorities are clamped, a bad time becomes now.
	// reviveDead keeps the dead letter's delivery count (one out of
	// range restarts at 0), so that the next delivery counts on.
	reviveDead = `INSERT INTO jobq_messages (queue, task_id, body, id_at, priority, visible_at, enqueued_at, concurrency_key, rate_key, grp, deliveries)
		SELECT queue, ` + keyColumnSQL + `, CAST(body AS BLOB), CASE WHEN typeof(id_at) = 'integer' THEN id_at ELSE 0 END,
			CASE WHEN typeof(priority) = 'integer' THEN max(-1000, min(1000, priority)) ELSE 0 END, ?1,
			CASE WHEN typeof(enqueued_at) = 'integer' THEN enqueued_at ELSE ?1 END, concurrency_key, rate_key, grp,
			CASE WHEN typeof(deliveries) = 'integer' AND deliveries BETWEEN 0 AND 2147483646 THEN deliveries ELSE 0 END
		FROM jobq_dead WHERE id = ?2 AND queue = ?3
		RETURNING grp`
	// forgetDeadResults deletes, in every generation, the result records
	// of the task of dead letter ?2 of queue ?1: requeued, it has not
	// ended.
	forgetDeadResults = `DELETE FROM jobq_results WHERE rowid IN (
		WITH RECURSIVE ` + gensOf + `
		SELECT r.rowid FROM gens CROSS JOIN jobq_results r
		WHERE r.queue = ?1 AND r.gen = gens.g AND r.task_id = (SELECT ` + keyColumnSQL + ` FROM jobq_dead WHERE id = ?2 AND queue = ?1))`
)

// ListDead implements driver.Driver. max <= 0 lists every dead letter.
func (d *Driver) ListDead(ctx context.Context, max int) ([]*driver.DeadMessage, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = -1 // SQLite: no limit
	}
	return d.deadRows(ctx, listDead, d.cfg.queue, max)
}

// deadRows reads the dead letters query returns.
func (d *Driver) deadRows(ctx context.Context, query string, args ...any) ([]*driver.DeadMessage, error) {
	rows, err := d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, d.wrap(ctx, "list dead letters", err)
	}
	defer rows.Close()
	var out []*driver.DeadMessage
	for rows.Next() {
		var (
			m                  driver.DeadMessage
			id, at             int64
			taskID, body, idAt any
		)
		if err := rows.Scan(&id, &taskID, &body, &idAt, &m.Reason, &m.Detail, &m.DeliveryCount, &at); err != nil {
			return nil, d.wrap(ctx, "list dead letters", err)
		}
		// A damaged row shows as well as it can be read.
		m.ID, m.Body, _ = loadTask(taskID, body, idAt)
		m.MessageID = strconv.FormatInt(id, 10)
		m.DeadAt = fromMicros(at)
		out = append(out, &m)
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap(ctx, "list dead letters", err)
	}
	return out, nil
}

// RequeueDead implements driver.Driver. A dead letter whose task ID is
// queued again merges into that message (counted, not duplicated). Named
// letters move in one transaction; every letter (ids nil) moves
// requeueChunk at a time, each chunk in a transaction of its own, so that
// other processes' writes, which wait for SQLite's one write lock only up
// to busy_timeout, are not held up for the whole move. Letters that die
// after the call starts are left for the next one.
func (d *Driver) RequeueDead(ctx context.Context, ids []string) (int64, error) {
	var moved int64
	var err error
	if ids != nil {
		moved, err = d.reviveChunk(ctx, parseDeadIDs(ids))
	} else {
		moved, err = d.reviveAll(ctx)
	}
	if moved > 0 {
		d.note.broadcast()
		d.note.results.broadcast()
	}
	return moved, err
}

// requeueChunk is how many dead letters one transaction of
// RequeueDead(nil) moves; a var so that a test can make chunks small.
var requeueChunk = 500

// afterRequeueChunk, when set by a test, runs after each committed chunk.
var afterRequeueChunk func()

// reviveAll moves every dead letter of the queue that exists when it
// starts, a chunk at a time in ID order. On an error it returns how many
// earlier chunks moved.
func (d *Driver) reviveAll(ctx context.Context) (int64, error) {
	var last sql.NullInt64
	if err := d.db.QueryRowContext(ctx, lastDeadID, d.cfg.queue).Scan(&last); err != nil {
		return 0, d.wrap(ctx, "requeue dead letters", err)
	}
	var moved int64
	for after := int64(0); last.Valid && after < last.Int64; {
		nums, err := d.deadChunk(ctx, after, last.Int64)
		if err != nil || len(nums) == 0 {
			return moved, err
		}
		n, err := d.reviveChunk(ctx, nums)
		if err != nil {
			return moved, err
		}
		moved += n
		after = nums[len(nums)-1]
		if afterRequeueChunk != nil {
			afterRequeueChunk()
		}
	}
	return moved, nil
}

// deadChunk reads the IDs of the next chunk of dead letters after after,
// up to last.
func (d *Driver) deadChunk(ctx context.Context, after, last int64) ([]int64, error) {
	rows, err := d.db.QueryContext(ctx, deadIDs, d.cfg.queue, after, last, requeueChunk)
	if err != nil {
		return nil, d.wrap(ctx, "requeue dead letters", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, d.wrap(ctx, "requeue dead letters", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap(ctx, "requeue dead letters", err)
	}
	return out, nil
}

// reviveChunk moves the dead letters nums back in one transaction.
func (d *Driver) reviveChunk(ctx context.Context, nums []int64) (int64, error) {
	var moved int64
	err := d.writeTx(ctx, "requeue dead letters", func(tx wtx) error {
		moved = 0 // a group that failed may run again
		now := micros(time.Now())
		for _, id := range nums {
			var grp string
			switch err := tx.QueryRow(reviveDead, now, id, d.cfg.queue).Scan(&grp); {
			case errors.Is(err, sql.ErrNoRows):
				// No dead letter of this ID, or its task is queued again:
				// the letter merges into that message (the driver
				// contract), leaving its group's counts and records.
				res, err := tx.Exec(deleteDead, id, d.cfg.queue)
				if err != nil {
					return err
				}
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				moved += n
				continue
			case err != nil:
				return err
			}
			if err := d.countGroup(tx, grp, "dead_lettered", -1, now); err != nil {
				return err
			}
			if _, err := tx.Exec(forgetDeadResults, d.cfg.queue, id); err != nil {
				return err
			}
			if _, err := tx.Exec(deleteDead, id, d.cfg.queue); err != nil {
				return err
			}
			moved++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

// PurgeDead implements driver.Driver.
func (d *Driver) PurgeDead(ctx context.Context, ids []string) (int64, error) {
	var n int64
	err := d.writeTx(ctx, "purge dead letters", func(tx wtx) error {
		if ids == nil {
			res, err := tx.Exec(deleteAllDead, d.cfg.queue)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		}
		for _, s := range ids {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				continue // not one of ours: unknown ids are skipped
			}
			res, err := tx.Exec(deleteDead, id, d.cfg.queue)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	return n, err
}

// parseDeadIDs turns message IDs into dead-letter row IDs; an ID that is
// not one of ours is skipped (nothing has it).
func parseDeadIDs(ids []string) []int64 {
	out := make([]int64, 0, len(ids))
	for _, s := range ids {
		if id, err := strconv.ParseInt(s, 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}
