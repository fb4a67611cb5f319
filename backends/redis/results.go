package redis

import (
	"bytes"
	"context"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Result records live in buckets, hashes of task id -> record that
// Redis expires as a whole, so nothing purges them; a bucket holds the
// records that expire within one span of time (bucketOf). See recordLua in
// scripts.go. A record is appendRecord's: the task ID, the state, the
// times and the portable layer's data.

// The driver keeps result records, stores them with its settlements,
// wakes waiters through pub/sub, and removes queued tasks by ID.
var (
	_ driver.ResultStore  = (*Driver)(nil)
	_ driver.ResultWaiter = (*Driver)(nil)
	_ driver.TaskRemover  = (*Driver)(nil)
)

// resultsChannel is where stored records are announced.
func (d *Driver) resultsChannel() string { return d.prefix + "results" }

// expiryOf is r's expiry, or jobq's default retention after it was
// written when it has none, so that no record lives forever.
func expiryOf(r *driver.ResultRecord) time.Time {
	if r.ExpiresAt.IsZero() {
		at := r.UpdatedAt
		if at.IsZero() {
			at = time.Now()
		}
		return at.Add(driver.DefaultRetention)
	}
	return r.ExpiresAt
}

// recordSize is the most bytes appendRecord appends for r.
func recordSize(r *driver.ResultRecord) int {
	return len(r.State) + 3 + 2*20 + len(r.Data) // two int64s of up to 20 digits
}

// appendRecord appends r to b packed as "state\nupdated ms\nexpiry ms\n"
// then its data; the task ID is the record's field in its bucket.
func appendRecord(b []byte, r *driver.ResultRecord) []byte {
	b = append(b, r.State...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, r.UpdatedAt.UnixMilli(), 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, expiryOf(r).UnixMilli(), 10)
	b = append(b, '\n')
	return append(b, r.Data...)
}

// decodeRecord reverses appendRecord; ok is false for a value it did not
// write.
func decodeRecord(id string, v []byte) (r *driver.ResultRecord, ok bool) {
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
	if err1 != nil || err2 != nil || len(f[0]) == 0 {
		return nil, false
	}
	return &driver.ResultRecord{
		ID: id, State: driver.ResultState(f[0]),
		UpdatedAt: time.UnixMilli(upd), ExpiresAt: time.UnixMilli(exp),
		Data: append([]byte(nil), v...),
	}, true
}

// bucketSpans is how many buckets a queue's retention spans: a record
// outlives its expiry by at most the retention divided by this (a
// GetResults hides it meanwhile), and a read looks into about this many
// buckets.
const bucketSpans = 16

// minBucketSpan is the shortest span of a bucket.
const minBucketSpan = time.Minute

// bucketOf names the bucket for records that expire by at most exp and
// were kept for at most keep: buckets span keep/bucketSpans (at least
// minBucketSpan, in whole seconds), and the bucket is the span that ends
// at or after exp. It returns the bucket's name (span ms:index) and when
// it expires (ms), a second after its span ends.
func bucketOf(exp time.Time, keep time.Duration) (name string, expireAt int64) {
	span := max(keep/bucketSpans, minBucketSpan).Truncate(time.Second).Milliseconds()
	idx := (exp.UnixMilli() + span - 1) / span
	return strconv.FormatInt(span, 10) + ":" + strconv.FormatInt(idx, 10), bucketEnd(span, idx)
}

// bucketEnd is when bucket idx of span (ms) expires, ms: a second after
// the last expiry it holds.
func bucketEnd(span, idx int64) int64 { return idx*span + 1000 }

// recordSet is a batch of records prepared for a script (recordLua): each
// one's task id and encoding (empty for none, or one already expired),
// and the bucket that takes them.
type recordSet struct {
	ids    []string
	vals   []recordVal
	bucket string
	expire int64 // when the bucket expires, ms
	n      int   // how many records there are
}

// recordVal is a record's encoding as a script argument. go-redis writes
// it through MarshalBinary; args passes a pointer to it, which boxes
// without an allocation where a byte slice allocates its header.
type recordVal []byte

// MarshalBinary returns the encoding, for go-redis.
func (v recordVal) MarshalBinary() ([]byte, error) { return v, nil }

// prepare makes the recordSet of the records rec(i) of n settlements
// (nil for none): the bucket is bucketOf the latest expiry and the longest
// retention among them. With no record at all it allocates nothing.
func prepare(n int, rec func(i int) *driver.ResultRecord) recordSet {
	// The records share one buffer, each value capped at its own end.
	size := 0
	for i := range n {
		if r := rec(i); r != nil {
			size += recordSize(r)
		}
	}
	if size == 0 { // no record (a record's size is never 0)
		return recordSet{}
	}
	rs := recordSet{ids: make([]string, n), vals: make([]recordVal, n)}
	buf := make([]byte, 0, size)
	now := time.Now()
	var last time.Time
	var keep time.Duration
	for i := range n {
		r := rec(i)
		if r == nil || r.ID == "" {
			continue
		}
		exp := expiryOf(r)
		if !exp.After(now) {
			continue
		}
		from := r.UpdatedAt
		if from.IsZero() || from.After(now) {
			from = now
		}
		keep = max(keep, exp.Sub(from))
		if exp.After(last) {
			last = exp
		}
		start := len(buf)
		buf = appendRecord(buf, r)
		rs.ids[i], rs.vals[i] = r.ID, buf[start:len(buf):len(buf)]
		rs.n++
	}
	if rs.n > 0 {
		rs.bucket, rs.expire = bucketOf(last, keep)
	}
	return rs
}

// prepareAll is prepare of a slice of records.
func prepareAll(recs []*driver.ResultRecord) recordSet {
	return prepare(len(recs), func(i int) *driver.ResultRecord { return recs[i] })
}

// args returns recordLua's arguments for the settlements lo to hi: the
// bucket, its expiry, the announcement and the all-have-records flag
// (head), and the (task id, record) pairs (tail), as pointers into rs (no
// allocation per record).
func (rs recordSet) args(lo, hi int) (head, tail []any) {
	all := "1"
	ann := make([]byte, 0, 16*(hi-lo))
	tail = make([]any, 0, 2*(hi-lo))
	for i := lo; i < hi; i++ {
		if rs.ids[i] == "" {
			all = "0"
		} else {
			if len(ann) > 0 {
				ann = append(ann, '\n')
			}
			ann = append(ann, rs.ids[i]...)
		}
		tail = append(tail, &rs.ids[i], &rs.vals[i])
	}
	return []any{rs.bucket, rs.expire, ann, all}, tail
}

// PutResults implements driver.ResultStore: one script stores the
// records in their bucket (a cancel request only where no unexpired record
// of its task exists, so it never hides an end) and announces them for
// waiters.
func (d *Driver) PutResults(ctx context.Context, recs []*driver.ResultRecord) error {
	const op = "store results"
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	rs := prepareAll(recs)
	if rs.n == 0 {
		return nil
	}
	// One script call per chunkSize records, pipelined, so that no call
	// holds Redis for long (or unpacks more than Lua's stack takes).
	var chunks [][]any
	var keys [][]string
	fixed := d.writes(rs)
	for _, b := range chunkBounds(len(recs)) {
		head, _ := rs.args(b[0], b[1])
		args := append(append(d.scriptArgs(4+3*(b[1]-b[0])), b[1]-b[0]), head[:3]...)
		for i := b[0]; i < b[1]; i++ {
			if rs.ids[i] == "" {
				continue
			}
			nx := "0"
			if recs[i].State == driver.ResultCancelRequested {
				nx = "1"
			}
			args = append(args, nx, &rs.ids[i], &rs.vals[i])
		}
		if len(args) > 5 {
			chunks = append(chunks, args)
			if fixed != nil {
				keys = append(keys, fixed)
			}
		}
	}
	for _, cmd := range d.runChunks(ctx, putResultsScript, chunks, keys) {
		if err := cmd.Err(); err != nil {
			return d.fail(ctx, op, err)
		}
	}
	return nil
}

// GetResults implements driver.ResultStore with one script that reads the
// ids from every live bucket. Where a task has records in more than one
// (a cancel request and the end, written with different retentions), an
// end wins over a cancel request, then the newest.
func (d *Driver) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	const op = "read results"
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	out := make([]*driver.ResultRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	now := time.Now()
	for _, b := range chunkBounds(len(ids)) {
		chunk := ids[b[0]:b[1]]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		buckets, err := d.run(ctx, getResultsScript, args...).Slice()
		if err != nil {
			return nil, d.fail(ctx, op, err)
		}
		for _, bucket := range buckets {
			vals, _ := bucket.([]any)
			for i, v := range vals {
				s, ok := v.(string)
				if !ok || i >= len(chunk) {
					continue
				}
				r, ok := decodeRecord(chunk[i], []byte(s))
				if !ok {
					d.log.Warn("redis: ignoring a result record jobq did not write", "queue", d.queue, "task", chunk[i])
					continue
				}
				if r.ExpiresAt.After(now) && newer(r, out[b[0]+i]) {
					out[b[0]+i] = r
				}
			}
		}
	}
	return out, nil
}

// newer reports whether record r should be returned rather than old: an
// end wins over a cancel request, then the newer wins.
func newer(r, old *driver.ResultRecord) bool {
	switch {
	case old == nil:
		return true
	case r.State.Final() != old.State.Final():
		return r.State.Final()
	default:
		return r.UpdatedAt.After(old.UpdatedAt)
	}
}

// PurgeResults implements driver.ResultStore: Redis expires the record
// buckets, so there is nothing to purge; it only drops expired buckets
// from the list of buckets, and returns 0.
func (d *Driver) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	const op = "purge results"
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	if err := d.run(ctx, forgetBucketsScript).Err(); err != nil {
		return 0, d.fail(ctx, op, err)
	}
	return 0, nil
}

// RemoveTasks implements driver.TaskRemover: one script removes the ready
// and delayed messages that own the records' task ids, stores the records
// of the tasks it removed and the cancel requests of the tasks it left in
// flight, and reports those (per chunk of chunkSize tasks, each its own
// script call).
func (d *Driver) RemoveTasks(ctx context.Context, cancelled, requested []*driver.ResultRecord) (removed, held []string, err error) {
	const op = "remove tasks"
	if err := d.closing.Check(ctx); err != nil {
		return nil, nil, err
	}
	if err := driver.CheckRemoveRecords(cancelled, requested); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	for _, recs := range [][]*driver.ResultRecord{cancelled, requested} {
		for _, r := range recs {
			if !expiryOf(r).After(now) {
				return nil, nil, driver.Errorf(errcode.InvalidArgument, "redis remove tasks: the record of task %q expired at %v, before it was stored", r.ID, r.ExpiresAt)
			}
		}
	}
	rs, asked := prepareAll(cancelled), prepareAll(requested)
	keys := d.writes(rs, "ids", "due", "ready")
	switch {
	case keys == nil:
		keys = d.keys[:1]
	case asked.n > 0:
		keys = append(keys, d.prefix+"rb:"+asked.bucket, d.prefix+"rbs")
	}
	for _, b := range chunkBounds(len(cancelled)) {
		head, tail := rs.args(b[0], b[1])
		args := append(append([]any{b[1] - b[0]}, head...), tail...)
		args = append(args, asked.bucket, asked.expire)
		for i := b[0]; i < b[1]; i++ {
			if requested == nil {
				args = append(args, "")
			} else {
				args = append(args, &asked.vals[i])
			}
		}
		got, err := removeScript.Run(ctx, d.client, keys, append(d.scriptArgs(len(args)), args...)...).StringSlice()
		if err != nil {
			return removed, held, d.fail(ctx, op, err)
		}
		for i, id := range got {
			if id == "" { // removed, then held
				held = append(held, got[i+1:]...)
				break
			}
			removed = append(removed, id)
		}
	}
	return removed, held, nil
}
