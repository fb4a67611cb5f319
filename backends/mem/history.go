package mem

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

var _ driver.ResultScanner = (*Driver)(nil)

// resultHistoryFallback is what mem's result-history declaration says: it
// has no engine to add records up in.
const resultHistoryFallback = "mem lists the window's records a page at a time and jobq adds them up (a paged scan, as on backends whose engine cannot aggregate)"

// ScanResults implements driver.ResultScanner: the window's unexpired
// records in order of UpdatedAt then ID; the cursor is the last record's
// "UnixNano ID".
func (d *Driver) ScanResults(ctx context.Context, since, until time.Time, cursor string, limit int) ([]*driver.ResultRecord, string, error) {
	if err := d.checkResults(ctx); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		return nil, "", driver.Errorf(errcode.InvalidArgument, "mem: scan limit %d; want at least 1", limit)
	}
	var afterAt int64
	var afterID string
	if cursor != "" {
		at, id, ok := strings.Cut(cursor, " ")
		n, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			return nil, "", driver.Errorf(errcode.InvalidArgument, "mem: scan cursor %q is not one ScanResults returned", cursor)
		}
		afterAt, afterID = n, id
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	var out []*driver.ResultRecord
	for _, r := range s.res.recs {
		at := r.UpdatedAt.UnixNano()
		if r.UpdatedAt.Before(since) || !r.UpdatedAt.Before(until) || !now.Before(r.ExpiresAt) ||
			(cursor != "" && (at < afterAt || (at == afterAt && r.ID <= afterID))) {
			continue
		}
		c := *r
		c.Data = append([]byte(nil), r.Data...)
		out = append(out, &c)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *driver.ResultRecord) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, strconv.FormatInt(last.UpdatedAt.UnixNano(), 10) + " " + last.ID, nil
}
