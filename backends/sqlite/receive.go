package sqlite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
)

// claimMessages leases up to N visible messages, highest priority first, then
// push order. It runs inside an immediate transaction, so no other process
// can claim the same rows between the SELECT and the UPDATE.
const claimMessages = `
UPDATE jobq_messages
SET lease = ?, visible_at = ?, deliveries = deliveries + 1
WHERE id IN (
	SELECT id FROM jobq_messages INDEXED BY jobq_messages_order
	WHERE queue = ? AND visible_at <= ?
	ORDER BY priority DESC, id
	LIMIT ?)
RETURNING id, task_id, body, deliveries, enqueued_at, priority`

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
		return nil, driver.Errorf(driver.InvalidArgument, "sqlite receive: visibility %v must be positive", p.Visibility)
	}
	deadline := time.Now().Add(p.Wait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		wake := d.note.wait()
		got, err := d.claim(ctx, p.Max, p.Visibility)
		if err != nil || len(got) > 0 {
			return got, err
		}
		for {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, nil
			}
			sleep := min(d.cfg.poll, left)
			if timer == nil {
				timer = time.NewTimer(sleep)
			} else {
				timer.Reset(sleep)
			}
			select {
			case <-ctx.Done():
				return nil, ctxErr(ctx.Err())
			case <-d.closed:
				return nil, errClosed
			case <-wake:
			case <-timer.C:
				// Only take the write lock if a message looks claimable.
				ok, err := d.idle.mayClaim(ctx, d.cfg.queue)
				if err != nil {
					return nil, d.wrap(ctx, "receive", err)
				}
				if !ok {
					continue
				}
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			break
		}
	}
}

// claim leases up to max visible messages for vis.
func (d *Driver) claim(ctx context.Context, max int, vis time.Duration) ([]*driver.Received, error) {
	token, err := newToken()
	if err != nil {
		return nil, driver.Errorf(driver.Internal, "sqlite receive: lease token: %w", err)
	}
	var out []*driver.Received
	var prio []int
	err = d.writeTx(ctx, "receive", func(tx wtx) error {
		now := micros(time.Now())
		expiry := addMicros(now, vis)
		got, gotPrio, handled, err := d.claimWithPolicies(tx, token, now, expiry, max)
		if handled || err != nil {
			out, prio = got, gotPrio
			return err
		}
		out, prio, err = scanClaimed(tx, token, expiry, claimMessages, token, expiry, d.cfg.queue, now, max)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 1 {
		// RETURNING yields rows in no particular order.
		sort.Sort(byClaimOrder{out, prio})
	}
	return out, nil
}

// scanClaimed runs a claim statement (RETURNING id, task_id, body,
// deliveries, enqueued_at, priority) and returns the messages it leased
// with token until expiry, with their priorities, in the statement's order.
func scanClaimed(tx wtx, token string, expiry int64, query string, args ...any) ([]*driver.Received, []int, error) {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []*driver.Received
	var prio []int
	for rows.Next() {
		var (
			id, enq  int64
			r        driver.Received
			priority int
		)
		if err := rows.Scan(&id, &r.ID, &r.Body, &r.DeliveryCount, &enq, &priority); err != nil {
			return nil, nil, err
		}
		r.EnqueuedAt = fromMicros(enq)
		r.Lease = driver.Lease{MessageID: strconv.FormatInt(id, 10), Token: token, Expiry: fromMicros(expiry)}
		out = append(out, &r)
		prio = append(prio, priority)
	}
	return out, prio, rows.Err()
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

// newToken returns a fresh random lease token.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
