package mem

import (
	"container/heap"
	"context"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

var (
	_ driver.ResultStore  = (*Driver)(nil)
	_ driver.ResultWaiter = (*Driver)(nil)
	_ driver.TaskRemover  = (*Driver)(nil)
)

// results are a store's result records by task ID, and the channel that
// wakes waiters when one is stored. Guarded by store.mu.
type results struct {
	recs map[string]*driver.ResultRecord
	wake chan struct{}
}

func newResults() results {
	return results{recs: map[string]*driver.ResultRecord{}, wake: make(chan struct{})}
}

// checkResults fails when the queue was opened with results unsupported.
func (d *Driver) checkResults(ctx context.Context) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if d.level(driver.Results) == driver.Unsupported {
		return unimplemented(driver.Results)
	}
	return nil
}

// live returns the unexpired record of id. Callers hold mu.
func (s *store) liveResult(id string, now time.Time) *driver.ResultRecord {
	r := s.res.recs[id]
	if r == nil || !now.Before(r.ExpiresAt) {
		return nil
	}
	return r
}

// putResult stores r under the rule of driver.ResultStore.PutResults.
// Callers hold mu and call wakeResults after.
func (s *store) putResult(r *driver.ResultRecord, now time.Time) {
	if r.State == driver.ResultCancelRequested && s.liveResult(r.ID, now) != nil {
		return
	}
	c := *r
	c.Data = append([]byte(nil), r.Data...)
	s.res.recs[r.ID] = &c
}

// wakeResults tells waiters to look again. Callers hold mu.
func (s *store) wakeResults() {
	close(s.res.wake)
	s.res.wake = make(chan struct{})
}

// PutResults implements driver.ResultStore.
func (d *Driver) PutResults(ctx context.Context, recs []*driver.ResultRecord) error {
	if err := d.checkResults(ctx); err != nil {
		return err
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.putResult(r, now)
	}
	s.wakeResults()
	return nil
}

// GetResults implements driver.ResultStore.
func (d *Driver) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	if err := d.checkResults(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*driver.ResultRecord, len(ids))
	for i, id := range ids {
		if r := s.liveResult(id, now); r != nil {
			c := *r
			c.Data = append([]byte(nil), r.Data...)
			out[i] = &c
		}
	}
	return out, nil
}

// PurgeResults implements driver.ResultStore.
func (d *Driver) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	if err := d.checkResults(ctx); err != nil {
		return 0, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for id, r := range s.res.recs {
		if !now.Before(r.ExpiresAt) {
			delete(s.res.recs, id)
			n++
		}
	}
	return n, nil
}

// WaitResults implements driver.ResultWaiter: it returns as soon as one of
// ids has a final record, or a record is stored, or wait passes.
func (d *Driver) WaitResults(ctx context.Context, ids []string, wait time.Duration) error {
	if err := d.checkResults(ctx); err != nil {
		return err
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	for _, id := range ids {
		if r := s.liveResult(id, now); r != nil && r.State.Final() {
			s.mu.Unlock()
			return nil
		}
	}
	wake := s.res.wake
	s.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closing.Done():
		return d.closing.Err()
	}
	return nil
}

// RemoveTasks implements driver.TaskRemover: under one hold of the lock,
// ready and delayed messages with the records' task IDs are deleted and
// the records of the tasks removed stored, and the cancel requests of the
// leased ones (held), which stay, stored under putResult's rule.
func (d *Driver) RemoveTasks(ctx context.Context, cancelled, requested []*driver.ResultRecord) (removed, held []string, err error) {
	if err := d.checkResults(ctx); err != nil {
		return nil, nil, err
	}
	if d.level(driver.Cancel) != driver.Native {
		return nil, nil, driver.Errorf(errcode.Unimplemented, "mem: this queue was opened with cancel %s: it cannot remove tasks by ID", d.level(driver.Cancel))
	}
	if err := driver.CheckRemoveRecords(cancelled, requested); err != nil {
		return nil, nil, err
	}
	want := make(map[string]int, len(cancelled))
	for i, r := range cancelled {
		want[r.ID] = i
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.promote(now)
	gone, leasedIDs := map[string]bool{}, map[string]bool{}
	readyGone := false
	for _, m := range s.msgs {
		i, ok := want[m.taskID]
		if !ok {
			continue
		}
		if m.state == leased {
			leasedIDs[m.taskID] = true
			continue
		}
		readyGone = readyGone || m.state == ready
		s.remove(m)
		if !gone[m.taskID] {
			gone[m.taskID] = true
			removed = append(removed, m.taskID)
			s.putResult(cancelled[i], now)
			s.tally(driver.GroupTally{Group: m.group, State: driver.GroupCancelled}, now)
		}
	}
	for id := range leasedIDs {
		if gone[id] {
			continue
		}
		held = append(held, id)
		if requested != nil {
			s.putResult(requested[want[id]], now)
		}
	}
	if len(removed) > 0 {
		s.wakeResults()
	}
	if readyGone {
		kept := s.readyQ[:0]
		for _, m := range s.readyQ {
			if m.state == ready {
				kept = append(kept, m)
			}
		}
		clear(s.readyQ[len(kept):])
		s.readyQ = kept
		heap.Init(&s.readyQ)
	}
	return removed, held, nil
}

// storable reports why a settlement's record cannot be stored, or nil.
func (d *Driver) storable(r *driver.ResultRecord) error {
	if d.level(driver.Results) == driver.Unsupported {
		return unimplemented(driver.Results)
	}
	return driver.CheckResultRecord(r)
}
