package redis

import (
	"context"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

var _ driver.ResultLister = (*Driver)(nil)

// ListResults implements driver.ResultLister: the record buckets (see
// recordLua) one after another, oldest expiry first, each read with
// HSCAN; the cursor is "bucket HSCAN-cursor skip". A task rewritten since it was
// first recorded has an older record in an older bucket: each page keeps
// only the records that GetResults, which reads every bucket, finds
// newest. A bucket written during the listing may be met or not.
func (d *Driver) ListResults(ctx context.Context, f driver.ResultFilter, cursor string, limit int) ([]*driver.ResultRecord, string, error) {
	const op = "list results"
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	bucket, scan, skip, err := parseListCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	now := time.Now()
	if bucket == "" {
		first, err := d.nextBucket(ctx, "", now)
		if err != nil || first == "" {
			return nil, "", err
		}
		bucket = first
	}
	kv, next, err := d.client.HScan(ctx, d.prefix+"rb:"+bucket, scan, "", int64(limit)).Result()
	if err != nil {
		return nil, "", d.fail(ctx, op, err)
	}
	// HSCAN's COUNT is a hint: a step may return more than limit. The
	// rest of such a step is read again, skipping what was returned.
	kv = kv[min(2*skip, len(kv)):]
	if len(kv) > 2*limit {
		kv = kv[:2*limit]
		next, skip = scan, skip+limit
	} else {
		skip = 0
	}
	var found []*driver.ResultRecord
	for i := 0; i+1 < len(kv); i += 2 {
		r, ok := decodeRecord(kv[i], []byte(kv[i+1]))
		if !ok || !r.ExpiresAt.After(now) || f.State != "" && r.State != f.State || !f.Since.IsZero() && r.UpdatedAt.Before(f.Since) {
			continue
		}
		found = append(found, r)
	}
	out, err := d.newest(ctx, found)
	if err != nil {
		return nil, "", err
	}
	if next != 0 || skip > 0 {
		return out, bucket + " " + strconv.FormatUint(next, 10) + " " + strconv.Itoa(skip), nil
	}
	after, err := d.nextBucket(ctx, bucket, now)
	if err != nil || after == "" {
		return out, "", err
	}
	return out, after + " 0 0", nil
}

// parseListCursor reads ListResults' cursor: bucket, HSCAN cursor, and how
// many of that HSCAN step's records were returned already.
func parseListCursor(cursor string) (bucket string, scan uint64, skip int, err error) {
	if cursor == "" {
		return "", 0, 0, nil
	}
	f := strings.Fields(cursor)
	if len(f) == 3 {
		scan, err = strconv.ParseUint(f[1], 10, 64)
		if err == nil {
			skip, err = strconv.Atoi(f[2])
		}
	}
	if len(f) != 3 || err != nil || skip < 0 {
		return "", 0, 0, driver.Errorf(errcode.InvalidArgument, "redis list results: cursor %q was not made by this backend", cursor)
	}
	return f[0], scan, skip, nil
}

// nextBucket returns the unexpired bucket listed after bucket (the first
// for ""), by expiry then name, or "" when there is none. The bucket's
// place comes from its name (bucketExpiry), not from the set of buckets:
// the oldest is listed first, so it may have expired, and left the set,
// while it was being listed.
func (d *Driver) nextBucket(ctx context.Context, bucket string, now time.Time) (string, error) {
	zs, err := d.client.ZRangeByScoreWithScores(ctx, d.prefix+"rbs", &goredis.ZRangeBy{Min: strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return "", d.fail(ctx, "list results", err)
	}
	if bucket == "" {
		if len(zs) == 0 {
			return "", nil
		}
		return zs[0].Member.(string), nil
	}
	at, ok := bucketExpiry(bucket)
	for i, z := range zs {
		name := z.Member.(string)
		switch {
		case !ok && name == bucket && i+1 < len(zs):
			return zs[i+1].Member.(string), nil
		case ok && (int64(z.Score) > at || int64(z.Score) == at && name > bucket):
			return name, nil
		}
	}
	return "", nil
}

// bucketExpiry is when the bucket named name expires (ms), as bucketOf
// names it; ok is false for a name bucketOf does not make.
func bucketExpiry(name string) (at int64, ok bool) {
	span, idx, found := strings.Cut(name, ":")
	if !found {
		return 0, false
	}
	s, err1 := strconv.ParseInt(span, 10, 64)
	i, err2 := strconv.ParseInt(idx, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return bucketEnd(s, i), true
}

// newest keeps the records of found that are their task's newest.
func (d *Driver) newest(ctx context.Context, found []*driver.ResultRecord) ([]*driver.ResultRecord, error) {
	if len(found) == 0 {
		return nil, nil
	}
	ids := make([]string, len(found))
	for i, r := range found {
		ids[i] = r.ID
	}
	cur, err := d.GetResults(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := found[:0]
	for i, r := range found {
		if c := cur[i]; c != nil && c.State == r.State && c.UpdatedAt.Equal(r.UpdatedAt) {
			out = append(out, r)
		}
	}
	return out, nil
}
