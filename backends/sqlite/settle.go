package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Every settlement is fenced by the lease: it matches the row only while
// the claim's token is recorded and the lease has not expired (visible_at is
// the lease's expiry while leased). A miss changes nothing and is LockLost.
const (
	renewLease = `UPDATE jobq_messages SET visible_at = ?
		WHERE id = ? AND lease = ? AND visible_at > ?`
	deleteLeased = `DELETE FROM jobq_messages
		WHERE id = ? AND lease = ? AND visible_at > ?`
	requeueLeased = `UPDATE jobq_messages SET lease = NULL, visible_at = ?
		WHERE id = ? AND lease = ? AND visible_at > ?`
	requeueLeasedBody = `UPDATE jobq_messages SET lease = NULL, visible_at = ?, body = ?, id_at = 0
		WHERE id = ? AND lease = ? AND visible_at > ?`
	copyToDead = `INSERT INTO jobq_dead
		(queue, task_id, body, id_at, priority, enqueued_at, deliveries, reason, detail, dead_at, concurrency_key, rate_key, grp)
		SELECT queue, task_id, COALESCE(?1, body), CASE WHEN ?1 IS NULL THEN id_at ELSE 0 END, priority, enqueued_at, deliveries, ?2, ?3, ?4, concurrency_key, rate_key, grp
		FROM jobq_messages WHERE id = ?5 AND lease = ?6 AND visible_at > ?7`
)

// Renew implements driver.Driver. The token stays the same.
func (d *Driver) Renew(ctx context.Context, lease driver.Lease, visibility time.Duration) (driver.Lease, error) {
	if visibility <= 0 {
		return lease, driver.Errorf(errcode.InvalidArgument, "sqlite renew: visibility %v must be positive", visibility)
	}
	id, err := leaseID(lease)
	if err != nil {
		return lease, err
	}
	var expiry int64
	err = d.writeTx(ctx, "renew", func(tx wtx) error {
		now := micros(time.Now())
		expiry = addMicros(now, visibility)
		res, err := tx.Exec(renewLease, expiry, id, lease.Token, now)
		if err != nil {
			return err
		}
		return lostIfNone(res, lease)
	})
	if err != nil {
		return lease, err
	}
	lease.Expiry = fromMicros(expiry)
	return lease, nil
}

// Complete implements driver.Driver: all deletions in one transaction,
// each with its record, which is stored only when the lease was held.
func (d *Driver) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	stored := false
	errs, committed := d.settleCommitted(ctx, "complete", len(reqs), func(tx wtx, now int64) ([]error, error) {
		errs := make([]error, len(reqs))
		recs := recordBatch{d: d, tx: tx, now: now}
		for i, r := range reqs {
			id, err := settleable(r.Lease, r.Result)
			if err != nil {
				errs[i] = err
				continue
			}
			res, err := tx.Exec(deleteLeased, id, r.Lease.Token, now)
			if err != nil {
				return nil, err
			}
			if errs[i] = lostIfNone(res, r.Lease); errs[i] != nil {
				continue
			}
			if err := d.tally(tx, r.Tally, now); err != nil {
				return nil, err
			}
			if r.Result == nil {
				continue
			}
			if err := recs.add(r.Result); err != nil {
				return nil, err
			}
			stored = true
		}
		return errs, recs.flush()
	})
	if stored && committed {
		d.note.results.broadcast()
	}
	return errs
}

// Requeue implements driver.Driver: all releases in one transaction. The
// delivery count is kept, so the next claim counts one more.
func (d *Driver) Requeue(ctx context.Context, reqs []driver.RequeueParams) []error {
	err := d.settle(ctx, "requeue", len(reqs), func(tx wtx, now int64) ([]error, error) {
		errs := make([]error, len(reqs))
		for i, r := range reqs {
			id, err := leaseID(r.Lease)
			if err != nil {
				errs[i] = err
				continue
			}
			visible := addMicros(now, max(r.Delay, 0))
			var res sql.Result
			if r.Body != nil {
				res, err = tx.Exec(requeueLeasedBody, visible, r.Body, id, r.Lease.Token, now)
			} else {
				res, err = tx.Exec(requeueLeased, visible, id, r.Lease.Token, now)
			}
			if err != nil {
				return nil, err
			}
			if errs[i] = lostIfNone(res, r.Lease); errs[i] == nil {
				if err := d.tally(tx, r.Tally, now); err != nil {
					return nil, err
				}
			}
		}
		return errs, nil
	})
	d.note.broadcast()
	return err
}

// DeadLetter implements driver.Driver: each message is copied to jobq_dead
// and deleted, and its record stored, in the same transaction.
func (d *Driver) DeadLetter(ctx context.Context, reqs []driver.DeadLetterParams) []error {
	stored := false
	errs, committed := d.settleCommitted(ctx, "dead-letter", len(reqs), func(tx wtx, now int64) ([]error, error) {
		errs := make([]error, len(reqs))
		recs := recordBatch{d: d, tx: tx, now: now}
		for i, r := range reqs {
			id, err := settleable(r.Lease, r.Result)
			if err != nil {
				errs[i] = err
				continue
			}
			var body any // NULL keeps the stored body
			if r.Body != nil {
				body = r.Body
			}
			res, err := tx.Exec(copyToDead, body, r.Reason, r.Detail, now, id, r.Lease.Token, now)
			if err != nil {
				return nil, err
			}
			if errs[i] = lostIfNone(res, r.Lease); errs[i] != nil {
				continue
			}
			if _, err := tx.Exec(deleteLeased, id, r.Lease.Token, now); err != nil {
				return nil, err
			}
			if err := d.tally(tx, r.Tally, now); err != nil {
				return nil, err
			}
			if r.Result == nil {
				continue
			}
			if err := recs.add(r.Result); err != nil {
				return nil, err
			}
			stored = true
		}
		return errs, recs.flush()
	})
	if stored && committed {
		d.note.results.broadcast()
	}
	return errs
}

// settleable parses a settlement's lease and checks its record (when it
// has one): the message ID to settle, or why it cannot be.
func settleable(l driver.Lease, rec *driver.ResultRecord) (int64, error) {
	id, err := leaseID(l)
	if err != nil {
		return 0, err
	}
	if rec != nil {
		if err := driver.CheckResultRecord(rec); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// settle runs a batch settlement in one transaction and applies the batch
// error convention: nil when every message succeeded, otherwise one error per
// message. An engine error fails (and rolls back) the whole batch.
func (d *Driver) settle(ctx context.Context, op string, n int, fn func(tx wtx, now int64) ([]error, error)) []error {
	errs, _ := d.settleCommitted(ctx, op, n, fn)
	return errs
}

// settleCommitted is settle that also reports whether the transaction
// committed.
func (d *Driver) settleCommitted(ctx context.Context, op string, n int, fn func(tx wtx, now int64) ([]error, error)) ([]error, bool) {
	if n == 0 {
		return nil, false
	}
	var errs []error
	err := d.writeTx(ctx, op, func(tx wtx) error {
		var err error
		errs, err = fn(tx, micros(time.Now()))
		return err
	})
	if err != nil {
		return driver.FanOut(err, n), false
	}
	for _, e := range errs {
		if e != nil {
			return errs, true
		}
	}
	return nil, true
}

// leaseID parses the message ID of a lease this driver issued.
func leaseID(l driver.Lease) (int64, error) {
	id, err := strconv.ParseInt(l.MessageID, 10, 64)
	if err != nil {
		return 0, driver.Errorf(errcode.InvalidArgument, "sqlite: lease message ID %q was not issued by the sqlite backend", l.MessageID)
	}
	return id, nil
}

// lostIfNone reports LockLost when a fenced statement matched no row.
func lostIfNone(res sql.Result, l driver.Lease) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return driver.Errorf(errcode.LockLost,
			"sqlite: lease on message %s is no longer held (it expired, was settled, or another receiver claimed the message)", l.MessageID)
	}
	return nil
}
