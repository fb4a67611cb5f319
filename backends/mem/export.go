package mem

import (
	"container/heap"
	"context"
	"sort"
	"time"

	"github.com/jobq/jobq/driver"
)

var _ driver.ResultLister = (*Driver)(nil)

// ListResults implements driver.ResultLister: records in task ID order,
// the cursor being the last ID a page looked at.
func (d *Driver) ListResults(ctx context.Context, f driver.ResultFilter, cursor string, limit int) ([]*driver.ResultRecord, string, error) {
	if err := d.checkResults(ctx); err != nil {
		return nil, "", err
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// The limit+1 smallest IDs after the cursor, kept in a max-heap: a
	// page costs one pass over the records, not a sort of them all.
	h := &idHeap{}
	for id := range s.res.recs {
		if id <= cursor {
			continue
		}
		if h.Len() <= limit {
			heap.Push(h, id)
		} else if id < (*h)[0] {
			(*h)[0] = id
			heap.Fix(h, 0)
		}
	}
	ids := []string(*h)
	sort.Strings(ids)
	more := len(ids) > limit
	if more {
		ids = ids[:limit]
	}
	var out []*driver.ResultRecord
	for _, id := range ids {
		r := s.liveResult(id, now)
		if r == nil || f.State != "" && r.State != f.State || !f.Since.IsZero() && r.UpdatedAt.Before(f.Since) {
			continue
		}
		c := *r
		c.Data = append([]byte(nil), r.Data...)
		out = append(out, &c)
	}
	if more {
		return out, ids[len(ids)-1], nil
	}
	return out, "", nil
}

// idHeap is a max-heap of task IDs.
type idHeap []string

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// resultHistoryFallback is what mem's result-history declaration says: it
// has no engine to add records up in.
const resultHistoryFallback = "mem lists its records (ListResults) a page at a time and jobq adds up those of the window, as on backends whose engine cannot aggregate"
