package jobq

import (
	"context"
	"hash/maphash"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// scanItem is one queued task or dead letter a bulk action read.
type scanItem struct {
	messageID, taskID string
	body              []byte
	dead              *driver.DeadMessage // set for a dead letter
	at                time.Time           // queued or dead-lettered
}

// readFunc reads one page of items after the cursor after (paged), or the
// window (after ignored); next is "" after the last page.
type readFunc func(ctx context.Context, after string, max int) (items []scanItem, next string, err error)

// bulk runs act over the items f matches, a page and a batch at a time
// (its callers have passed bulkGate).
func (a *Admin) bulk(ctx context.Context, f Filter, act bulkAction) (BulkResult, error) {
	q := a.q
	if f.BatchSize == 0 {
		f.BatchSize = defaultBulkBatch
	}
	if q.caps.Level(driver.BulkActions) != driver.Native {
		return a.bulkWindow(ctx, f, act)
	}
	pager, ok := q.drv.(driver.Pager)
	if !ok {
		return BulkResult{}, &Error{Code: errcode.Internal, Op: act.op, Queue: q.url,
			Msg: "backend " + q.backend() + " declares bulk-actions native but its driver is no driver.Pager: declare it emulated, or implement PageQueued and PageDead"}
	}
	return a.bulkPaged(ctx, f, act, pagedReader(pager, act.dead))
}

// bulkPaged pages through the whole store with the driver's cursor: each
// page is one short read, and its matches one batch, so no lock grows with
// the store, and memory only by act.once.
func (a *Admin) bulkPaged(ctx context.Context, f Filter, act bulkAction, read readFunc) (BulkResult, error) {
	var res BulkResult
	after := ""
	for {
		items, next, err := read(ctx, after, f.BatchSize)
		if err != nil {
			return res, a.q.wrap(act.op, err)
		}
		if err := a.step(ctx, &f, act, items, &res); err != nil {
			return res, err
		}
		if next == "" {
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return res, a.q.wrap(act.op, err)
		}
		after = next
	}
}

// bulkWindow is the bulk action where the backend cannot page: it reads
// the window that Peek or ListDead return, acts on what it has not seen
// before, and reads again while a pass finds something new (acted-on dead
// letters leave the window, letting others in; ones that do not match stay
// and, once they fill it, end the run). Partial is set when the last
// window was full.
func (a *Admin) bulkWindow(ctx context.Context, f Filter, act bulkAction) (BulkResult, error) {
	q := a.q
	window := driver.BulkWindow
	if mp := q.caps.MaxPeek; mp > 0 {
		window = min(window, mp)
	}
	var res BulkResult
	seen := map[string]bool{}
	for pass := 0; pass < maxEmulatedPasses; pass++ {
		all, full, err := a.readWindow(ctx, act.dead, window)
		if err != nil {
			return res, q.wrap(act.op, err)
		}
		var fresh []scanItem
		for _, it := range all {
			if !seen[it.messageID] {
				seen[it.messageID] = true
				fresh = append(fresh, it)
			}
		}
		if err := a.step(ctx, &f, act, fresh, &res); err != nil {
			return res, err
		}
		if full {
			res.Partial = "the backend cannot page through the whole store (" + q.caps.Features[driver.BulkActions].Fallback + ")"
		} else {
			res.Partial = ""
		}
		if f.DryRun || len(fresh) == 0 {
			return res, nil
		}
	}
	return res, nil
}

// readWindow reads the first window of queued tasks (in flight ones left
// out) or dead letters, and reports whether the window was full.
func (a *Admin) readWindow(ctx context.Context, dead bool, window int) ([]scanItem, bool, error) {
	if dead {
		ms, err := a.q.drv.ListDead(ctx, window)
		return deadItems(ms), len(ms) >= window, err
	}
	ms, err := a.q.drv.Peek(ctx, window)
	var out []scanItem
	for _, m := range ms {
		if !m.InFlight {
			out = append(out, queuedItem(m))
		}
	}
	return out, len(ms) >= window, err
}

// step matches one page of items and, unless it is a dry run, acts on the
// matches in batches of f.BatchSize.
func (a *Admin) step(ctx context.Context, f *Filter, act bulkAction, items []scanItem, res *BulkResult) error {
	res.Scanned += int64(len(items))
	ms, err := a.match(ctx, act.op, f, items)
	if err != nil {
		return err
	}
	ms = act.once.fresh(ms)
	res.Matched += int64(len(ms))
	if f.DryRun {
		return nil
	}
	for start := 0; start < len(ms); start += f.BatchSize {
		// Stopped between batches, never inside one: a batch cut off
		// mid-call may or may not have been applied, and Done could not
		// say which.
		if err := ctx.Err(); err != nil {
			return a.q.wrap(act.op, err)
		}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchGrace)
		done, pending, err := act.act(bctx, ms[start:min(start+f.BatchSize, len(ms))])
		cancel()
		res.Done += done
		res.Pending += pending
		if err != nil {
			return err
		}
	}
	return nil
}

// batchGrace bounds a batch that goes on after the run's context ended.
const batchGrace = 30 * time.Second

// match returns the items that f matches. Dead letters' result records
// are read, a page at once, only when f asks how tasks ended.
func (a *Admin) match(ctx context.Context, op string, f *Filter, items []scanItem) ([]bulkMatch, error) {
	q := a.q
	tasks := make([]*Task, len(items))
	var recs map[string]*Result
	var ids []string
	for i, it := range items {
		tasks[i], _ = unmarshalTask(it.body)
		if it.taskID == "" && tasks[i] != nil {
			items[i].taskID = tasks[i].ID
		}
		if it.dead != nil && items[i].taskID != "" {
			ids = append(ids, items[i].taskID)
		}
	}
	if f.needsRecords() && q.results != nil && len(ids) > 0 {
		rs, err := q.getResults(ctx, op, q.results, ids)
		if err != nil {
			return nil, err
		}
		recs = make(map[string]*Result, len(rs))
		for i, r := range rs {
			if r == nil {
				continue
			}
			if res, _, err := decodeRecord(r); err == nil {
				recs[ids[i]] = res
			}
		}
	}
	var out []bulkMatch
	for i, it := range items {
		t := tasks[i]
		if !f.matchTime(it.at) || !f.matchTask(t) {
			continue
		}
		if it.dead != nil && !f.matchEnd(it.dead, t, recs[it.taskID]) {
			continue
		}
		m := bulkMatch{messageID: it.messageID, taskID: it.taskID}
		if t != nil {
			m.stash = t.Stash
		}
		out = append(out, m)
	}
	return out, nil
}

// taskSet is the tasks a bulk run has met, by a hash of their task ID (or
// of the message ID of a letter without one): about 40 bytes a task.
type taskSet struct {
	seed maphash.Seed
	seen map[uint64]struct{}
}

func newTaskSet() *taskSet {
	return &taskSet{seed: maphash.MakeSeed(), seen: map[uint64]struct{}{}}
}

// fresh returns the matches of tasks that earlier pages did not hold, and
// adds this page's. Two letters of one task on the same page both stay, as
// before (the driver merges them); a nil set keeps every match.
func (s *taskSet) fresh(ms []bulkMatch) []bulkMatch {
	if s == nil {
		return ms
	}
	out := ms[:0]
	var page []uint64
	for _, m := range ms {
		key := "t" + m.taskID
		if m.taskID == "" {
			key = "m" + m.messageID
		}
		h := maphash.String(s.seed, key)
		if _, ok := s.seen[h]; ok {
			continue
		}
		page = append(page, h)
		out = append(out, m)
	}
	for _, h := range page {
		s.seen[h] = struct{}{}
	}
	return out
}

// pagedReader reads pages of queued tasks or dead letters from p.
func pagedReader(p driver.Pager, dead bool) readFunc {
	if dead {
		return func(ctx context.Context, after string, max int) ([]scanItem, string, error) {
			ms, next, err := p.PageDead(ctx, after, max)
			return deadItems(ms), next, err
		}
	}
	return func(ctx context.Context, after string, max int) ([]scanItem, string, error) {
		ms, next, err := p.PageQueued(ctx, after, max)
		out := make([]scanItem, len(ms))
		for i, m := range ms {
			out[i] = queuedItem(m)
		}
		return out, next, err
	}
}

func queuedItem(m *driver.PeekedMessage) scanItem {
	return scanItem{messageID: m.MessageID, taskID: m.ID, body: m.Body, at: m.EnqueuedAt}
}

func deadItems(ms []*driver.DeadMessage) []scanItem {
	out := make([]scanItem, len(ms))
	for i, m := range ms {
		out[i] = scanItem{messageID: m.MessageID, taskID: m.ID, body: m.Body, dead: m, at: m.DeadAt}
	}
	return out
}
