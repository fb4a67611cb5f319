package postgres

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
)

// minSleep keeps a receiver from spinning when a message is visible but
// locked by a concurrent claim (SKIP LOCKED passed it over), so that the
// next visibility time is already past.
const minSleep = time.Millisecond

// Receive implements driver.Driver. It claims at once; when nothing is
// visible and p.Wait allows, it sleeps until a push notification, the next
// message's visibility time or the poll interval, whichever comes first, and
// claims again.
func (d *pgDriver) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	if err := d.begin(); err != nil {
		return nil, err
	}
	if p.Max < 1 {
		p.Max = 1
	}
	if p.Visibility <= 0 {
		return nil, driver.Errorf(driver.InvalidArgument, "postgres receive: visibility %s must be positive", p.Visibility)
	}
	deadline := time.Now().Add(p.Wait)
	if p.Wait > 0 {
		d.startListener()
	}
	for {
		woken := d.wake.wait()
		msgs, err := d.claim(ctx, p.Max, p.Visibility)
		if err != nil {
			return nil, wrap(ctx, "receive", err)
		}
		remaining := time.Until(deadline)
		if len(msgs) > 0 || remaining <= 0 {
			return msgs, nil
		}
		sleep := min(remaining, d.cfg.poll)
		next, err := d.nextVisible(ctx)
		if err != nil {
			return nil, wrap(ctx, "receive", err)
		}
		if next >= 0 {
			sleep = max(min(sleep, next), minSleep)
		}
		timer := time.NewTimer(sleep)
		d.idle.Add(1)
		select {
		case <-woken:
		case <-timer.C:
		case <-d.done:
		case <-ctx.Done():
		}
		d.idle.Add(-1)
		timer.Stop()
		if err := d.begin(); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, wrap(ctx, "receive", err)
		}
	}
}

// claim runs the claim statement once and returns the rows in claim order.
func (d *pgDriver) claim(ctx context.Context, max int, visibility time.Duration) ([]*driver.Received, error) {
	// The lease's expiry is reckoned on this machine's clock from before the
	// request, so it is never later than the database's own (whose clock
	// may differ): a worker stops trusting its lease early, never late.
	expiry := time.Now().Add(visibility)
	claimSQL, err := d.claimSQL(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, claimSQL, d.cfg.queue, max, micros(visibility))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type claimed struct {
		r        *driver.Received
		id       int64
		priority int32
	}
	var out []claimed
	for rows.Next() {
		var c claimed
		var deliveries int32
		r := &driver.Received{Lease: driver.Lease{Expiry: expiry}}
		if err := rows.Scan(&c.id, &r.ID, &r.Body, &deliveries, &r.EnqueuedAt, &r.Lease.Token, &c.priority); err != nil {
			return nil, err
		}
		r.Lease.Token = leaseToken(r.Lease.Token, c.priority)
		r.DeliveryCount = int(deliveries)
		r.Lease.MessageID = strconv.FormatInt(c.id, 10)
		c.r = r
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].priority != out[j].priority {
			return out[i].priority > out[j].priority
		}
		return out[i].id < out[j].id
	})
	msgs := make([]*driver.Received, len(out))
	for i, c := range out {
		msgs[i] = c.r
	}
	return msgs, nil
}

// nextVisible returns how long until the queue's next invisible message
// becomes visible, or -1 when the queue is empty.
func (d *pgDriver) nextVisible(ctx context.Context) (time.Duration, error) {
	var us *int64
	if err := d.pool.QueryRow(ctx, d.sql.nextVisible, d.cfg.queue).Scan(&us); err != nil {
		return 0, err
	}
	if us == nil {
		return -1, nil
	}
	return max(time.Duration(*us)*time.Microsecond, 0), nil
}
