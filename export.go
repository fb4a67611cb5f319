package jobq

import (
	"context"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// exportPage is how many records one ListResults call returns at most:
// what an export holds in memory at once.
const exportPage = 500

// ExportResults streams the queue's result records that pass f to each,
// page by page (a page of 500 at most in memory, whatever the number of
// records), in the backend's order. It stops at the first error each
// returns. A record's Value is read from the stash when it was kept
// there. It fails with Unimplemented on a backend that cannot list its
// records.
func (a *Admin) ExportResults(ctx context.Context, f driver.ResultFilter, each func(*Result) error) error {
	const op = "export results"
	q := a.q
	store, err := q.resultStore(op)
	if err != nil {
		return err
	}
	lister, ok := store.(driver.ResultLister)
	if !ok {
		return &Error{Code: errcode.Unimplemented, Op: op, Queue: q.url,
			Msg: "backend " + q.backend() + " cannot list its result records: read them one by one with Queue.Result"}
	}
	if err := checkExportFilter(op, f); err != nil {
		return err
	}
	var sent map[string]bool // the members' records exportMembers sent
	if m, ok := q.drv.(driver.GroupMemberLister); ok && f.Group != "" && q.caps.Level(driver.Groups) == driver.Emulated {
		if sent, err = a.exportMembers(ctx, op, store, m, f, each); err != nil {
			return err
		}
	}
	return a.exportListed(ctx, op, lister, f, sent, each)
}

// checkExportFilter refuses a filter ExportResults cannot apply.
func checkExportFilter(op string, f driver.ResultFilter) error {
	if f.Group != "" {
		if err := validGroupName(op, f.Group); err != nil {
			return err
		}
	}
	if f.State != "" && !f.State.Final() && f.State != driver.ResultCancelRequested {
		return errorf(errcode.InvalidArgument, op, "unknown state %q: use succeeded, dead-lettered, cancelled or cancel-requested", f.State)
	}
	return nil
}

// exportListed sends the records lister lists that pass f, but those in
// sent, page by page.
func (a *Admin) exportListed(ctx context.Context, op string, lister driver.ResultLister, f driver.ResultFilter, sent map[string]bool, each func(*Result) error) error {
	q := a.q
	cursor := ""
	for {
		recs, next, err := lister.ListResults(ctx, f, cursor, exportPage)
		if err != nil {
			return q.wrap(op, err)
		}
		for _, rec := range recs {
			r, err := q.result(ctx, op, rec)
			if err != nil {
				return err
			}
			if f.Group != "" && r.Group != f.Group || sent[r.ID] {
				continue
			}
			if err := each(r); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// exportMembers sends the records of group f.Group's members that pass
// f's State and Since, each with the group, a page at a time, and returns
// their IDs: where the backend keeps groups as member lists, its workers'
// records name no group, so the listing that follows finds only records
// written with one.
func (a *Admin) exportMembers(ctx context.Context, op string, store driver.ResultStore, m driver.GroupMemberLister, f driver.ResultFilter, each func(*Result) error) (map[string]bool, error) {
	q := a.q
	ids, err := m.GroupMembers(ctx, f.Group)
	if err != nil {
		return nil, q.wrap(op, err)
	}
	sent := make(map[string]bool, len(ids))
	for lo := 0; lo < len(ids); lo += exportPage {
		recs, err := q.getResults(ctx, op, store, ids[lo:min(lo+exportPage, len(ids))])
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec == nil || f.State != "" && rec.State != f.State || rec.UpdatedAt.Before(f.Since) {
				continue
			}
			r, err := q.result(ctx, op, rec)
			if err != nil {
				return nil, err
			}
			r.Group = f.Group
			if err := each(r); err != nil {
				return nil, err
			}
			sent[r.ID] = true
		}
	}
	return sent, nil
}
