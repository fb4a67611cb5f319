package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
)

// Result records are string keys P.."r:"..task id whose TTL is the
// record's expiry, so Redis purges them (see recordLua in scripts.go). The
// value is encodeRecord's: the state, the times and the portable layer's
// data.

// The driver keeps result records, stores them with its settlements,
// wakes waiters through pub/sub, and removes queued tasks by ID.
var (
	_ driver.ResultStore   = (*Driver)(nil)
	_ driver.ResultSettler = (*Driver)(nil)
	_ driver.ResultWaiter  = (*Driver)(nil)
	_ driver.TaskRemover   = (*Driver)(nil)
)

// defaultRetention is the expiry of a record that comes without one, so
// that no record lives forever.
const defaultRetention = 7 * 24 * time.Hour

// recordKey names the result record of task id.
func (d *Driver) recordKey(id string) string { return d.prefix + "r:" + id }

// resultsChannel is where stored records are announced.
func (d *Driver) resultsChannel() string { return d.prefix + "results" }

// expiryOf is r's expiry, or the default retention after it was written
// when it has none.
func expiryOf(r *driver.ResultRecord) time.Time {
	if r.ExpiresAt.IsZero() {
		at := r.UpdatedAt
		if at.IsZero() {
			at = time.Now()
		}
		return at.Add(defaultRetention)
	}
	return r.ExpiresAt
}

// maxIDLen is the longest task ID a record can have: its length is
// written in six digits.
const maxIDLen = 999999

// encodeRecord packs r as the task ID's length in six digits, the task
// ID, then "state\nupdated ms\nexpiry ms\n" and the data. The settle
// scripts read the ID from it (recordLua).
func encodeRecord(r *driver.ResultRecord) []byte {
	b := make([]byte, 0, 6+len(r.ID)+len(r.State)+32+len(r.Data))
	b = fmt.Appendf(b, "%06d", len(r.ID))
	b = append(b, r.ID...)
	b = append(b, r.State...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, r.UpdatedAt.UnixMilli(), 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, expiryOf(r).UnixMilli(), 10)
	b = append(b, '\n')
	return append(b, r.Data...)
}

// decodeRecord reverses encodeRecord; ok is false for a value it did not
// write, or one of another task.
func decodeRecord(id string, v []byte) (r *driver.ResultRecord, ok bool) {
	if len(v) < 6 {
		return nil, false
	}
	n, err := strconv.Atoi(string(v[:6]))
	if err != nil || n < 0 || len(v) < 6+n || string(v[6:6+n]) != id {
		return nil, false
	}
	v = v[6+n:]
	var f [3][]byte
	for i := range f {
		j := bytes.IndexByte(v, '\n')
		if j < 0 {
			return nil, false
		}
		f[i], v = v[:j], v[j+1:]
	}
	upd, err1 := strconv.ParseInt(string(f[1]), 10, 64)
	exp, err2 := strconv.ParseInt(string(f[2]), 10, 64)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	return &driver.ResultRecord{
		ID: id, State: driver.ResultState(f[0]),
		UpdatedAt: time.UnixMilli(upd), ExpiresAt: time.UnixMilli(exp),
		Data: append([]byte(nil), v...),
	}, true
}

// recordBatch prepares the records of one settlement call: the encoded
// record of each settlement ("" for none, or one already expired) and the
// time to live the script gives them all, the longest they need (a key
// may outlive its record a little; GetResults hides it then).
func recordBatch(recs []*driver.ResultRecord) (vals []any, head []any, err error) {
	vals = make([]any, len(recs))
	now := time.Now()
	var ttl time.Duration
	for i, r := range recs {
		vals[i] = ""
		if r == nil {
			continue
		}
		if len(r.ID) > maxIDLen {
			return nil, nil, driver.Errorf(driver.InvalidArgument, "redis: task ID of %d bytes is too long for a result record (at most %d)", len(r.ID), maxIDLen)
		}
		left := expiryOf(r).Sub(now)
		if left <= 0 {
			continue
		}
		ttl = max(ttl, left)
		vals[i] = encodeRecord(r)
	}
	return vals, []any{max(ms(ttl), 1)}, nil
}

// PutResults implements driver.ResultStore: one pipelined round trip of
// SETs (with NX for a cancel request, which must not hide an end) and an
// announcement for waiters.
func (d *Driver) PutResults(ctx context.Context, recs []*driver.ResultRecord) error {
	const op = "store results"
	if err := d.begin(ctx, op); err != nil {
		return err
	}
	now := time.Now()
	ids := make([]string, 0, len(recs))
	var sets []*goredis.StatusCmd
	_, err := d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, r := range recs {
			if r == nil {
				continue
			}
			ttl := expiryOf(r).Sub(now)
			if ttl <= 0 || len(r.ID) > maxIDLen {
				continue // expired already (as good as purged), or no record can have the ID
			}
			a := goredis.SetArgs{TTL: ttl}
			if r.State == driver.ResultCancelRequested {
				a.Mode = "NX"
			}
			sets = append(sets, p.SetArgs(ctx, d.recordKey(r.ID), encodeRecord(r), a))
			ids = append(ids, r.ID)
		}
		if len(ids) > 0 {
			p.Publish(ctx, d.resultsChannel(), strings.Join(ids, "\n"))
		}
		return nil
	})
	if err == nil {
		return nil
	}
	// A SET NX that finds the key answers nil, which go-redis reports as
	// goredis.Nil: the record was (rightly) not stored. Any other error
	// fails the call.
	for _, c := range sets {
		if e := c.Err(); e != nil && !errors.Is(e, goredis.Nil) {
			return d.fail(op, e)
		}
	}
	if errors.Is(err, goredis.Nil) {
		return nil
	}
	return d.fail(op, err)
}

// GetResults implements driver.ResultStore with one MGET (the keys share
// the queue's hash tag, so it works on a cluster too).
func (d *Driver) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	const op = "read results"
	if err := d.begin(ctx, op); err != nil {
		return nil, err
	}
	out := make([]*driver.ResultRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = d.recordKey(id)
	}
	vals, err := d.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, d.fail(op, err)
	}
	now := time.Now()
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		r, ok := decodeRecord(ids[i], []byte(s))
		if !ok {
			d.log.Warn("redis: ignoring a result record jobq did not write", "queue", d.queue, "key", keys[i])
			continue
		}
		if !r.ExpiresAt.After(now) {
			continue // Redis has not expired it yet
		}
		out[i] = r
	}
	return out, nil
}

// PurgeResults implements driver.ResultStore: Redis expires records by
// their TTL, so there is nothing to purge.
func (d *Driver) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	return 0, d.begin(ctx, "purge results")
}

// CompleteWithResults implements driver.ResultSettler: the complete script
// stores each record in the same script call as its settlement.
func (d *Driver) CompleteWithResults(ctx context.Context, leases []driver.Lease, recs []*driver.ResultRecord) []error {
	vals, head, err := checkRecs(len(leases), recs)
	if err != nil {
		return repeatErr(err, len(leases))
	}
	return d.settle(ctx, "complete", completeResultsScript, len(leases), head,
		func(i int) driver.Lease { return leases[i] },
		func(i int) []any { return []any{leases[i].MessageID, leases[i].Token, vals[i]} })
}

// DeadLetterWithResults implements driver.ResultSettler like
// CompleteWithResults.
func (d *Driver) DeadLetterWithResults(ctx context.Context, reqs []driver.DeadLetterParams, recs []*driver.ResultRecord) []error {
	vals, head, err := checkRecs(len(reqs), recs)
	if err != nil {
		return repeatErr(err, len(reqs))
	}
	return d.settle(ctx, "dead-letter", deadLetterResultsScript, len(reqs), head,
		func(i int) driver.Lease { return reqs[i].Lease },
		func(i int) []any { return append(deadLetterArgs(reqs[i]), vals[i]) })
}

// checkRecs checks that there is a record (or nil) per settlement and
// prepares them (recordBatch).
func checkRecs(n int, recs []*driver.ResultRecord) (vals, head []any, err error) {
	if len(recs) != n {
		return nil, nil, driver.Errorf(driver.InvalidArgument, "redis: %d result records for %d settlements; pass one per settlement (nil for none)", len(recs), n)
	}
	return recordBatch(recs)
}

// repeatErr is err for each of n items.
func repeatErr(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// RemoveTasks implements driver.TaskRemover: one script removes the ready
// and delayed messages that own the task ids.
func (d *Driver) RemoveTasks(ctx context.Context, ids []string) ([]string, error) {
	const op = "remove tasks"
	if err := d.begin(ctx, op); err != nil {
		return nil, err
	}
	var removed []string
	for _, b := range chunkBounds(len(ids)) {
		args := make([]any, 0, b[1]-b[0])
		for _, id := range ids[b[0]:b[1]] {
			args = append(args, id)
		}
		got, err := d.run(ctx, removeScript, args...).StringSlice()
		if err != nil {
			return removed, d.fail(op, err)
		}
		removed = append(removed, got...)
	}
	return removed, nil
}
