package confsuite

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// bulkNative is how many tasks the bulk checks use where BulkActions is
// native: enough that a scan must take many pages.
const bulkNative = 10000

// bulkScale is how many tasks a bulk check uses on q: bulkNative (or the
// harness's BulkTasks) where the backend pages, else the window it
// declares it sees (Emulated: the driver.BulkWindow, or MaxPeek when that
// is smaller), so that every task is within what the declaration
// promises.
func (c *C) bulkScale(q *handle) int {
	if level(q, driver.BulkActions) == driver.Native {
		if n := c.h.BulkTasks; n > 0 && n != bulkNative {
			c.Logf("the harness lowers the bulk checks from %d tasks to %d (BulkTasks)", bulkNative, n)
			return n
		}
		return bulkNative
	}
	n := driver.BulkWindow
	if mp := q.Capabilities().MaxPeek; mp > 0 {
		n = min(n, mp)
	}
	return n
}

// checkBulkCancelByFilter: CancelWhere by kind, over bulkScale queued tasks,
// half of them of the kind: a dry run counts them and changes nothing; the
// run cancels exactly them (removed where Cancel is native, requested
// where emulated) and leaves the others; a filterless cancel is refused.
// Unsupported: the bulk actions fail with Unimplemented.
func checkBulkCancelByFilter(c *C) {
	q := c.open()
	if level(q, driver.BulkActions) == driver.Unsupported {
		_, err := q.Admin().CancelWhere(c.ctx(), jobq.Filter{All: true})
		c.expectCode(err, errcode.Unimplemented, "CancelWhere on a backend without bulk actions")
		c.skipNeeds("feature bulk-actions", "bulk actions are unsupported: "+q.Capabilities().Features[driver.BulkActions].Fallback)
	}
	if level(q, driver.Results) == driver.Unsupported || level(q, driver.Cancel) == driver.Unsupported {
		_, err := q.Admin().CancelWhere(c.ctx(), jobq.Filter{Kind: "x"})
		c.expectCode(err, errcode.Unimplemented, "CancelWhere on a backend that cannot cancel")
		c.skipNeeds("feature cancel", "cancel is unsupported here")
	}
	_, err := q.Admin().CancelWhere(c.ctx(), jobq.Filter{})
	c.expectCode(err, errcode.InvalidArgument, "CancelWhere with no filter and no All")

	n := c.bulkScale(q)
	start := time.Now()
	kinds := c.pushKinds(q, n)
	c.Logf("pushed %d tasks in %v", n, time.Since(start).Round(time.Millisecond))
	want := int64(n / 2)
	dry, err := q.Admin().CancelWhere(c.ctx(), jobq.Filter{Kind: "bulk-a", DryRun: true})
	if err != nil || dry.Matched != want || dry.Done != 0 || dry.Scanned < int64(n) {
		c.Fatalf("CancelWhere(kind bulk-a, dry run) over %d tasks = %+v, %v; want %d matched, none done, all scanned", n, dry, err, want)
	}
	start = time.Now()
	got, err := q.Admin().CancelWhere(c.ctx(), jobq.Filter{Kind: "bulk-a", BatchSize: 700})
	c.Logf("CancelWhere over %d tasks: %+v in %v", n, got, time.Since(start).Round(time.Millisecond))
	if err != nil || got.Matched != want || got.Done != want {
		c.Fatalf("CancelWhere(kind bulk-a) over %d tasks = %+v, %v; want %d matched and done", n, got, err, want)
	}
	emulated := level(q, driver.Cancel) != driver.Native
	if emulated != (got.Pending == got.Done) {
		c.Errorf("CancelWhere: %d of %d cancels pending with cancel %s; want all pending where cancel is emulated, none where native",
			got.Pending, got.Done, level(q, driver.Cancel))
	}
	if level(q, driver.BulkActions) == driver.Emulated && got.Partial == "" {
		c.Errorf("CancelWhere on an emulated backend with its window full reported nothing partial")
	}
	c.bulkCancelled(q, kinds, emulated, want)
}

// bulkCancelled checks what CancelWhere(kind bulk-a) left: records of the
// cancelled tasks (cancelled, or cancel-requested where cancel is
// emulated), none for the others, and, where cancel is native, only the
// want tasks of kind bulk-b queued.
func (c *C) bulkCancelled(q *handle, kinds map[string]string, emulated bool, want int64) {
	c.Helper()
	wantState := driver.ResultCancelled
	if emulated {
		wantState = driver.ResultCancelRequested
	}
	for id, kind := range sample(kinds, 20) {
		r, err := q.Result(c.ctx(), id)
		switch {
		case kind == "bulk-a" && (err != nil || r.State != wantState):
			c.Errorf("task %s of kind bulk-a after CancelWhere: record %v, %v; want %s", id, r, err, wantState)
		case kind == "bulk-b" && errcode.Of(err) != errcode.NotFound:
			c.Errorf("task %s of kind bulk-b after CancelWhere(kind bulk-a): record %v, %v; want none", id, r, err)
		}
	}
	if emulated {
		return
	}
	again, err := q.Admin().CancelWhere(c.ctx(), jobq.Filter{Kind: "bulk-a", DryRun: true})
	if err != nil || again.Matched != 0 {
		c.Errorf("after CancelWhere(kind bulk-a) a dry run still matches %d (%v)", again.Matched, err)
	}
	left, err := q.Admin().CancelWhere(c.ctx(), jobq.Filter{All: true, DryRun: true})
	if err != nil || left.Matched != want {
		c.Errorf("after CancelWhere(kind bulk-a) %d tasks are queued (%v); want the %d of kind bulk-b", left.Matched, err, want)
	}
}

// checkBulkRequeueByFilter: RequeueWhere by error text over bulkScale dead
// letters, half of them matching: a dry run counts them; the run requeues
// exactly them (they can be received again) and leaves the others dead;
// PurgeWhere refuses no filter, then with All deletes the rest.
func checkBulkRequeueByFilter(c *C) {
	q := c.open()
	if level(q, driver.DeadLetter) == driver.Unsupported || level(q, driver.BulkActions) == driver.Unsupported {
		_, err := q.Admin().RequeueWhere(c.ctx(), jobq.Filter{})
		c.expectCode(err, errcode.Unimplemented, "RequeueWhere on a backend without dead letters or bulk actions")
		c.skipNeeds("feature bulk-actions", "dead letters or bulk actions are unsupported")
	}
	n := c.bulkScale(q)
	c.pushKinds(q, n)
	c.settleAll(q, n, func(e *jobq.Envelope) error {
		reason := "exit code 1"
		if e.Task.Kind == "bulk-a" {
			reason = "exit code 137 (killed)"
		}
		return e.DeadLetter(c.ctx(), reason, "")
	})
	want := int64(n / 2)
	f := jobq.Filter{ErrorContains: "137", DryRun: true}
	dry, err := q.Admin().RequeueWhere(c.ctx(), f)
	if err != nil || dry.Matched != want || dry.Done != 0 {
		c.Fatalf("RequeueWhere(error 137, dry run) over %d dead letters = %+v, %v; want %d matched, none done", n, dry, err, want)
	}
	f.DryRun = false
	start := time.Now()
	got, err := q.Admin().RequeueWhere(c.ctx(), f)
	c.Logf("RequeueWhere over %d dead letters: %+v in %v", n, got, time.Since(start).Round(time.Millisecond))
	if err != nil || got.Done != want {
		c.Fatalf("RequeueWhere(error 137) over %d dead letters = %+v, %v; want %d requeued", n, got, err, want)
	}
	f.DryRun = true
	if again, err := q.Admin().RequeueWhere(c.ctx(), f); err != nil || again.Matched != 0 {
		c.Errorf("after RequeueWhere(error 137) a dry run still matches %d dead letters (%v)", again.Matched, err)
	}
	var mu sync.Mutex
	wrong := 0
	c.settleAll(q, int(want), func(e *jobq.Envelope) error {
		if e.Task.Kind != "bulk-a" {
			mu.Lock()
			wrong++
			mu.Unlock()
		}
		return e.Complete(c.ctx())
	})
	if wrong > 0 {
		c.Errorf("RequeueWhere(error 137) requeued %d tasks of another kind", wrong)
	}

	_, err = q.Admin().PurgeWhere(c.ctx(), jobq.Filter{})
	c.expectCode(err, errcode.InvalidArgument, "PurgeWhere with no filter and no All")
	purged, err := q.Admin().PurgeWhere(c.ctx(), jobq.Filter{All: true})
	if err != nil || purged.Done != want {
		c.Errorf("PurgeWhere(All) = %+v, %v; want the %d dead letters left purged", purged, err, want)
	}
	if dead, err := q.Admin().DeadLetters(c.ctx(), 10); err != nil || len(dead) != 0 {
		c.Errorf("after PurgeWhere(All) %d dead letters are listed (%v)", len(dead), err)
	}
}

// pushKinds pushes n tasks in batches, alternately of kind bulk-a and
// bulk-b, and returns each one's kind by ID.
func (c *C) pushKinds(q *handle, n int) map[string]string {
	c.Helper()
	kinds := make(map[string]string, n)
	const batch = 500
	for start := 0; start < n; start += batch {
		ts := make([]*jobq.Task, 0, batch)
		for i := start; i < min(start+batch, n); i++ {
			t := task(fmt.Sprintf("bulk %d", i))
			t.Kind = []string{"bulk-a", "bulk-b"}[i%2]
			ts = append(ts, t)
		}
		if _, err := q.PushBatch(c.ctx(), ts, jobq.PushOptions{}); err != nil {
			c.Fatalf("push tasks %d to %d: %v", start, start+len(ts), err)
		}
		for _, t := range ts {
			kinds[t.ID] = t.Kind
		}
	}
	return kinds
}

// settleAll receives n tasks and settles each with settle, several at a
// time.
func (c *C) settleAll(q *handle, n int, settle func(*jobq.Envelope) error) {
	c.Helper()
	limit := 100
	if m := q.Capabilities().MaxReceiveBatch; m > 0 {
		limit = min(limit, m)
	}
	done := 0
	deadline := time.Now().Add(5 * time.Minute)
	for done < n && time.Now().Before(deadline) {
		envs, err := q.ReceiveBatch(c.ctx(), min(limit, n-done), jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: time.Second})
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		var wg sync.WaitGroup
		var ok atomic.Int64
		errs := make([]error, len(envs))
		for i, e := range envs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if errs[i] = settle(e); errs[i] == nil {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			// A lock lost (a settlement slower than a short lease, as on
			// an emulator) brings the task back: it is settled then.
			if err != nil && errcode.Of(err) != errcode.LockLost {
				c.Fatalf("settle: %v", err)
			}
		}
		done += int(ok.Load())
	}
	if done < n {
		c.Fatalf("received and settled %d of %d tasks in 5 minutes", done, n)
	}
}

// sample returns up to n entries of m.
func sample(m map[string]string, n int) map[string]string {
	out := make(map[string]string, n)
	for k, v := range m {
		if len(out) == n {
			break
		}
		out[k] = v
	}
	return out
}
