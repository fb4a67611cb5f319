package jobq

import (
	"context"
	"strings"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// isRecordState reports whether st names result records that PurgeWhere
// can delete: those of tasks that succeeded or were cancelled.
func isRecordState(st string) bool {
	return st == string(driver.ResultSucceeded) || st == string(driver.ResultCancelled)
}

// purgeRecords deletes the result records that f matches (f.State
// succeeded or cancelled), a page of the records' listing at a time: one
// DeleteResults call per page's matches. Records hold no task, so a
// filter on kind or key is refused. No queued or running task is touched.
func (a *Admin) purgeRecords(ctx context.Context, op string, f Filter) (BulkResult, error) {
	q := a.q
	if f.Kind != "" || f.Key != "" {
		return BulkResult{}, errorf(errcode.InvalidArgument, op, "state %s filters result records, which do not keep the task's kind or key: drop --kind/--key, or filter on exit code, error text or time", f.State)
	}
	if err := f.check(op, f.State, true); err != nil {
		return BulkResult{}, err
	}
	store, err := q.resultStore(op)
	if err != nil {
		return BulkResult{}, err
	}
	lister, ok := store.(driver.ResultLister)
	del, ok2 := store.(driver.ResultDeleter)
	if !ok || !ok2 {
		return BulkResult{}, &Error{Code: errcode.Unimplemented, Op: op, Queue: q.url,
			Msg: "backend " + q.backend() + " cannot list and delete its result records: they expire after the queue's retention"}
	}
	if f.BatchSize == 0 {
		f.BatchSize = defaultBulkBatch
	}
	// A listing need not meet every record when records are deleted
	// during it (driver.ResultLister: records purged meanwhile may be met
	// or not; a Redis HSCAN step is read again by position), so a pass
	// that deleted something is followed by another, until one deletes
	// nothing.
	var res BulkResult
	for pass := 0; pass < maxRecordPasses; pass++ {
		done := res.Done
		if err := a.purgeRecordsPass(ctx, op, f, lister, del, &res); err != nil {
			return res, err
		}
		if f.DryRun || res.Done == done {
			break
		}
	}
	return res, nil
}

// maxRecordPasses bounds the passes of a record purge, should workers
// keep writing matching records meanwhile.
const maxRecordPasses = 10

// purgeRecordsPass lists the records once, deleting each page's matches
// with one DeleteResults call, and adds what it did to res.
func (a *Admin) purgeRecordsPass(ctx context.Context, op string, f Filter, lister driver.ResultLister, del driver.ResultDeleter, res *BulkResult) error {
	q := a.q
	lf := driver.ResultFilter{State: driver.ResultState(f.State), Since: f.Since}
	cursor := ""
	for {
		recs, next, err := lister.ListResults(ctx, lf, cursor, f.BatchSize)
		if err != nil {
			return q.wrap(op, err)
		}
		res.Scanned += int64(len(recs))
		ids, refs := f.matchRecords(recs)
		res.Matched += int64(len(ids))
		if !f.DryRun && len(ids) > 0 {
			n, err := del.DeleteResults(ctx, ids)
			res.Done += n
			if err != nil {
				return q.wrap(op, err)
			}
			q.dropStashed(ctx, refs...)
		}
		if next == "" {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return q.wrap(op, err)
		}
		cursor = next
	}
}

// matchRecords returns the task IDs of the records f matches, and the
// stashed values they point to.
func (f *Filter) matchRecords(recs []*driver.ResultRecord) (ids []string, refs []*StashRef) {
	for _, rec := range recs {
		if string(rec.State) != f.State || !f.matchTime(rec.UpdatedAt) {
			continue
		}
		r, ref, err := decodeRecord(rec)
		if err != nil {
			r = nil
		}
		if !f.matchRecord(r) {
			continue
		}
		ids = append(ids, rec.ID)
		if ref != nil {
			refs = append(refs, ref)
		}
	}
	return ids, refs
}

// matchRecord reports whether a decoded record (nil when it cannot be
// decoded) matches f's exit code and error text.
func (f *Filter) matchRecord(r *Result) bool {
	if f.ExitCode == nil && f.ErrorContains == "" {
		return true
	}
	if r == nil {
		return false
	}
	if f.ExitCode != nil && (r.ExitCode == nil || *r.ExitCode != *f.ExitCode) {
		return false
	}
	return f.ErrorContains == "" || strings.Contains(r.Error, f.ErrorContains)
}
