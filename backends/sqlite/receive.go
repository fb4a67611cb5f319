package sqlite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// claimMessages leases up to N visible messages, highest priority first, then
// push order. It runs inside an immediate transaction, so no other process
// can claim the same rows between the SELECT and the UPDATE.
//
// SQLite stores any value in any column, so a row another tool wrote may
// hold text where jobq keeps numbers. Such a row must neither fail the
// claim nor be skipped forever: a visible_at that is not a number counts as
// visible (the claim replaces it), a delivery count that cannot grow is left
// as it is (nextDelivery), and scanClaimed quarantines the rows whose
// fields are damaged.
//
// It claims nothing while the queue has a concurrency or rate policy
// (limitedBy): such a queue is claimed by claimWithPolicies, which the
// claim runs only when this statement claimed nothing. Testing for the
// policies here, once per statement, spares every claim of a queue without
// them the statement of its own that read its policies (a fifth of a
// one-message claim's CPU). The test is in the LIMIT, which SQLite
// evaluates once before it scans: in the WHERE clause it was a filter on
// each row, so on a queue with policies the statement read every visible
// message (the whole backlog) to claim none.
const claimMessages = `
UPDATE jobq_messages
SET lease = ?, visible_at = ?, deliveries = ` + nextDelivery + `
WHERE id IN (
	SELECT id FROM jobq_messages INDEXED BY jobq_messages_order
	WHERE queue = ? AND (visible_at <= ? OR typeof(visible_at) IN ('text', 'blob'))
	ORDER BY priority DESC, id
	LIMIT CASE WHEN ` + limitedBy + ` THEN 0 ELSE ? END)
RETURNING ` + claimedColumns

// nextDelivery is a claim's new delivery count: one more, unless the
// stored count is not an integer in range, which it keeps for scanClaimed
// to see.
const nextDelivery = `CASE WHEN typeof(deliveries) = 'integer' AND deliveries BETWEEN 0 AND 2147483646 THEN deliveries + 1 ELSE deliveries END`

// claimedColumns are what a claim returns, for scanClaimed.
const claimedColumns = `id, task_id, body, id_at, deliveries, enqueued_at, priority, trace_parent, grp`

// quarantineClaimed moves a claimed row whose fields are damaged to the
// dead letters, with the reason, keeping only values ListDead and
// RequeueDead can read.
var quarantineClaimed = `INSERT INTO jobq_dead
	(queue, task_id, body, id_at, priority, enqueued_at, deliveries, reason, detail, dead_at, concurrency_key, rate_key)
	SELECT queue, ` + keyColumnSQL + `, CAST(body AS BLOB),
		CASE WHEN typeof(id_at) = 'integer' THEN id_at ELSE 0 END,
		CASE WHEN typeof(priority) = 'integer' THEN max(-1000, min(1000, priority)) ELSE 0 END,
		CASE WHEN typeof(enqueued_at) = 'integer' THEN enqueued_at ELSE ? END,
		CASE WHEN typeof(deliveries) = 'integer' AND deliveries BETWEEN 0 AND 2147483647 THEN deliveries ELSE 0 END,
		?, '', ?, concurrency_key, rate_key
	FROM jobq_messages WHERE id = ? AND lease = ?`

// Receive implements driver.Driver. When nothing is visible it waits up to
// p.Wait, woken at once by pushes in this process and checking every poll
// interval for other processes' pushes and for delayed or expired messages.
func (d *Driver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	if p.Max < 1 {
		p.Max = 1
	}
	if p.Max > maxReceiveBatch {
		p.Max = maxReceiveBatch
	}
	if p.Visibility <= 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "sqlite receive: visibility %v must be positive", p.Visibility)
	}
	deadline := time.Now().Add(p.Wait)
	var timer pollTimer
	defer timer.stop()
	for {
		wake := d.note.wait()
		got, retryAt, err := d.claim(ctx, p.Max, p.Visibility)
		if err != nil || len(got) > 0 {
			return got, err
		}
		d.reclaim(ctx)
		if more, err := d.awaitClaimable(ctx, wake, deadline, retryAt, &timer); !more || err != nil {
			return nil, err
		}
	}
}

// awaitClaimable waits until a claim may find something: a push in this
// process (wake), a poll whose idle check finds a message claimable, or
// retryAt (µs; 0: none), when a rate key at its limit admits again. It
// returns false when deadline passes first, and an error when ctx ends or
// the driver closes.
func (d *Driver) awaitClaimable(ctx context.Context, wake <-chan struct{}, deadline time.Time, retryAt int64, timer *pollTimer) (bool, error) {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		sleep := min(d.cfg.poll, left)
		if retryAt > 0 {
			// Look then, rather than up to a poll later.
			sleep = min(sleep, max(time.Until(fromMicros(retryAt)), 0))
		}
		select {
		case <-ctx.Done():
			return false, ctxErr(ctx.Err())
		case <-d.closing.Done():
			return false, d.closing.Err()
		case <-wake:
			timer.stop()
			return true, nil
		case <-timer.after(sleep):
			if retryAt > 0 && time.Now().UnixMicro() >= retryAt {
				retryAt = 0 // the window has freed: back to the poll
			}
			// Only take the write lock if a message looks claimable
			// (one held back by the window is: it is visible).
			ok, err := d.idle.mayClaim(ctx, d.cfg.queue)
			if err != nil {
				return false, d.wrap(ctx, "receive", err)
			}
			if ok {
				return true, nil
			}
			d.reclaim(ctx)
		}
	}
}

// pollTimer is one timer reused across a receive's sleeps.
type pollTimer struct{ t *time.Timer }

// after starts the timer for d and returns its channel.
func (p *pollTimer) after(d time.Duration) <-chan time.Time {
	if p.t == nil {
		p.t = time.NewTimer(d)
	} else {
		p.t.Reset(d)
	}
	return p.t.C
}

// stop stops the timer, if it runs.
func (p *pollTimer) stop() {
	if p.t != nil {
		p.t.Stop()
	}
}

// claim leases up to max visible messages for vis. When it leases none
// and a rate key at its limit held messages back, retryAt is when the key
// admits again (µs; otherwise 0).
func (d *Driver) claim(ctx context.Context, max int, vis time.Duration) (out []*driver.Received, retryAt int64, err error) {
	token, err := newToken()
	if err != nil {
		return nil, 0, driver.Errorf(errcode.Internal, "sqlite receive: lease token: %w", err)
	}
	var prio []int
	err = d.writeTx(ctx, "receive", func(tx wtx) error {
		now := micros(time.Now())
		expiry := addMicros(now, vis)
		out, prio, err = d.scanClaimed(tx, token, now, expiry, claimMessages, token, expiry, d.cfg.queue, now, d.cfg.queue, d.cfg.queue, max)
		if err != nil || len(out) > 0 {
			return err
		}
		// Nothing claimed: the queue may have policies that the plain
		// claim leaves to this one. Without them, the plain claim's
		// answer stands.
		out, prio, retryAt, err = d.claimWithPolicies(tx, token, now, expiry, max)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if len(out) > 1 {
		// RETURNING yields rows in no particular order.
		sort.Sort(byClaimOrder{out, prio})
	}
	return out, retryAt, nil
}

// scanClaimed runs a claim statement (RETURNING claimedColumns) and returns
// the messages it leased with token until expiry, with their priorities, in
// the statement's order. Rows whose fields are damaged (see claimDamage) are
// moved to the dead letters in the same transaction instead.
func (d *Driver) scanClaimed(tx wtx, token string, now, expiry int64, query string, args ...any) ([]*driver.Received, []int, error) {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []*driver.Received
	var prio []int
	type damaged struct {
		id  int64
		why string
	}
	var bad []damaged
	for rows.Next() {
		var (
			id                                              int64
			taskID, body, idAt, dc, enq, rowPri, trace, grp any
		)
		if err := rows.Scan(&id, &taskID, &body, &idAt, &dc, &enq, &rowPri, &trace, &grp); err != nil {
			return nil, nil, err
		}
		r, priority, why := claimedMessage(taskID, body, idAt, dc, enq, rowPri)
		if why != "" {
			bad = append(bad, damaged{id, why})
			continue
		}
		r.Lease = driver.Lease{MessageID: strconv.FormatInt(id, 10), Token: token, Expiry: fromMicros(expiry)}
		r.TraceParent = traceText(trace)
		r.Group = traceText(grp)
		out = append(out, r)
		prio = append(prio, priority)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows.Close()
	for _, b := range bad {
		reason := "corrupt record: " + b.why
		if _, err := tx.Exec(quarantineClaimed, now, reason, now, b.id, token); err != nil {
			return nil, nil, err
		}
		if _, err := tx.Exec(deleteLeased, b.id, token, now); err != nil {
			return nil, nil, err
		}
		d.log.Warn("jobq: corrupt message dead-lettered", "message_id", b.id, "reason", reason)
	}
	return out, prio, nil
}

// claimedMessage reads a claimed row's values, which SQLite may hold as any
// type, and says what is damaged ("" when nothing is).
func claimedMessage(taskID, body, idAt, dc, enq, rowPri any) (r *driver.Received, priority int, why string) {
	r = &driver.Received{}
	if r.ID, r.Body, why = loadTask(taskID, body, idAt); why != "" {
		return nil, 0, why
	}
	n, ok := dc.(int64)
	if !ok || n < 1 || n > math.MaxInt32 {
		return nil, 0, fmt.Sprintf("its delivery count (deliveries column) is %s, not a count", sqlValue(dc))
	}
	r.DeliveryCount = int(n)
	at, ok := enq.(int64)
	if !ok {
		return nil, 0, fmt.Sprintf("its enqueue time (enqueued_at column) is %s, not Unix microseconds", sqlValue(enq))
	}
	r.EnqueuedAt = fromMicros(at)
	p, ok := rowPri.(int64)
	if !ok || p < driver.MinPriority || p > driver.MaxPriority {
		return nil, 0, fmt.Sprintf("its priority is %s, not an integer in %d..%d", sqlValue(rowPri), driver.MinPriority, driver.MaxPriority)
	}
	return r, int(p), ""
}

// sqlValue shows a stored value in a reason, briefly and as valid text.
func sqlValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return fmt.Sprintf("a %d-byte BLOB", len(x))
	case string:
		if len(x) > 40 {
			x = x[:40]
		}
		return "TEXT " + strconv.QuoteToASCII(x)
	case float64:
		return "REAL " + strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// byClaimOrder sorts claimed messages by priority (descending), then push
// order (message ID ascending).
type byClaimOrder struct {
	r    []*driver.Received
	prio []int
}

func (s byClaimOrder) Len() int { return len(s.r) }
func (s byClaimOrder) Swap(i, j int) {
	s.r[i], s.r[j] = s.r[j], s.r[i]
	s.prio[i], s.prio[j] = s.prio[j], s.prio[i]
}
func (s byClaimOrder) Less(i, j int) bool {
	if s.prio[i] != s.prio[j] {
		return s.prio[i] > s.prio[j]
	}
	a, _ := strconv.ParseInt(s.r[i].Lease.MessageID, 10, 64)
	b, _ := strconv.ParseInt(s.r[j].Lease.MessageID, 10, 64)
	return a < b
}

// tokenBytes is the random bytes in a lease token, written as hex digits.
// Neither 16, 12 nor 13: older versions' 32-, 24- and 26-digit tokens are
// what fenceSchema refuses.
const tokenBytes = 14

// newToken returns a fresh random lease token.
func newToken() (string, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
