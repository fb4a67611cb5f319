package confsuite

import (
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// purgeRecordsTasks is how many tasks checkPurgeRecordsByFilter runs,
// unless the harness's ExportRecords or BulkTasks is lower (emulators).
const purgeRecordsTasks = 2000

// checkPurgeRecordsByFilter: PurgeWhere with State succeeded over the
// records of tasks that ran, half of which succeeded and half were
// dead-lettered: kind and key are refused (records keep neither), as is no
// filter; a dry run counts the succeeded records and deletes nothing; a
// bound before every record matches none; the run deletes exactly the
// succeeded records (Queue.Result finds none, ExportResults lists none)
// and leaves the dead-lettered ones and a queued task alone.
func checkPurgeRecordsByFilter(c *C) {
	q := c.open()
	c.needResults(q)
	if level(q, driver.DeadLetter) == driver.Unsupported {
		c.skipNeeds("feature dead-letter", "the check ends half its tasks as dead letters")
	}
	ad := q.Admin()
	c.purgeRecordsRefusals(q)
	n := purgeRecordsTasks
	for _, m := range []int{c.h.ExportRecords, c.h.BulkTasks} {
		if m > 0 && m < n {
			c.Logf("the harness lowers the check from %d tasks to %d (ExportRecords, BulkTasks)", n, m)
			n = m
		}
	}
	start := time.Now().Add(-time.Second)
	kinds := c.runHalfSucceeding(q, n)
	want := int64(n / 2)
	count := func(st driver.ResultState) int64 { return c.countRecords(q, st) }
	// Where records live in another store they may show a moment later.
	if !c.poll(func() bool { return count(driver.ResultSucceeded) == want && count(driver.ResultDeadLettered) == want }) {
		c.Fatalf("after running %d tasks: %d succeeded and %d dead-lettered records; want %d of each", n, count(driver.ResultSucceeded), count(driver.ResultDeadLettered), want)
	}
	queued := c.push(q, task("queued while records are purged"))[0]

	f := jobq.Filter{State: "succeeded", Since: start, BatchSize: 300}
	c.purgeRecordsDryRun(q, f, start, want)
	begun := time.Now()
	got, err := ad.PurgeWhere(c.ctx(), f)
	c.Logf("PurgeWhere(succeeded) over %d records: %+v in %v", n, got, time.Since(begun).Round(time.Millisecond))
	if err != nil || got.Matched != want || got.Done != want {
		c.Fatalf("PurgeWhere(succeeded) = %+v, %v; want %d matched and done", got, err, want)
	}
	if k, d := count(driver.ResultSucceeded), count(driver.ResultDeadLettered); k != 0 || d != want {
		c.Errorf("after PurgeWhere(succeeded): %d succeeded and %d dead-lettered records; want 0 and %d", k, d, want)
	}
	c.purgedRecords(q, kinds)
	again, err := ad.PurgeWhere(c.ctx(), f)
	if err != nil || again.Matched != 0 || again.Done != 0 {
		c.Errorf("a second PurgeWhere(succeeded) = %+v, %v; want nothing left", again, err)
	}
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != queued {
		c.Fatalf("received %s; want the task queued before the purge, %s", e.Task.ID, queued)
	}
	c.complete(e)
}

// purgeRecordsRefusals: PurgeWhere of records fails with Unimplemented
// (and the check skips) where the driver cannot list and delete them, and
// with InvalidArgument given a kind, a key or no filter.
func (c *C) purgeRecordsRefusals(q *handle) {
	c.Helper()
	ad := q.Admin()
	_, lists := hooks.Driver(q.Queue).(driver.ResultLister)
	if _, deletes := hooks.Driver(q.Queue).(driver.ResultDeleter); !lists || !deletes {
		_, err := ad.PurgeWhere(c.ctx(), jobq.Filter{State: "succeeded", All: true})
		c.expectCode(err, errcode.Unimplemented, "PurgeWhere of records on a backend that cannot list and delete them")
		c.skipNeeds("driver.ResultLister and driver.ResultDeleter", "the backend cannot list and delete its records")
	}
	for _, f := range []jobq.Filter{{State: "succeeded", Kind: "bulk-a"}, {State: "succeeded", Key: "k"}, {State: "succeeded"}} {
		_, err := ad.PurgeWhere(c.ctx(), f)
		c.expectCode(err, errcode.InvalidArgument, "PurgeWhere of records with kind, key or no filter")
	}
}

// purgedRecords checks a sample of the tasks after their succeeded
// records were purged: no record for those of kind bulk-a (succeeded),
// the dead-lettered record for those of kind bulk-b.
func (c *C) purgedRecords(q *handle, kinds map[string]string) {
	c.Helper()
	for id, kind := range sample(kinds, 20) {
		r, err := q.Result(c.ctx(), id)
		switch {
		case kind == "bulk-a" && errcode.Of(err) != errcode.NotFound:
			c.Errorf("task %s succeeded, its record purged: Result = %v, %v; want NotFound", id, r, err)
		case kind == "bulk-b" && (err != nil || r.State != driver.ResultDeadLettered):
			c.Errorf("task %s dead-lettered: Result = %v, %v after purging succeeded records; want its record kept", id, r, err)
		}
	}
}

// runHalfSucceeding pushes n tasks (pushKinds) and runs them: those of
// kind bulk-a succeed, the others are dead-lettered.
func (c *C) runHalfSucceeding(q *handle, n int) map[string]string {
	c.Helper()
	kinds := c.pushKinds(q, n)
	c.settleAll(q, n, func(e *jobq.Envelope) error {
		if e.Task.Kind == "bulk-a" {
			return e.Complete(c.ctx())
		}
		return e.DeadLetter(c.ctx(), "exit code 1", "")
	})
	return kinds
}

// countRecords counts the records of state st that ExportResults lists.
func (c *C) countRecords(q *handle, st driver.ResultState) int64 {
	c.Helper()
	var k int64
	if err := q.Admin().ExportResults(c.ctx(), driver.ResultFilter{State: st}, func(*jobq.Result) error { k++; return nil }); err != nil {
		c.Fatalf("ExportResults(state %s): %v", st, err)
	}
	return k
}

// purgeRecordsDryRun: a dry run of PurgeWhere with f (want matches) counts
// them and deletes nothing, and a bound before start matches none.
func (c *C) purgeRecordsDryRun(q *handle, f jobq.Filter, start time.Time, want int64) {
	c.Helper()
	before, err := q.Admin().PurgeWhere(c.ctx(), jobq.Filter{State: "succeeded", Until: start, DryRun: true})
	if err != nil || before.Matched != 0 {
		c.Fatalf("PurgeWhere(succeeded, until before every record, dry run) = %+v, %v; want none matched", before, err)
	}
	dry := f
	dry.DryRun = true
	got, err := q.Admin().PurgeWhere(c.ctx(), dry)
	if err != nil || got.Matched != want || got.Done != 0 || got.Scanned < want {
		c.Fatalf("PurgeWhere(succeeded, dry run) = %+v, %v; want %d matched, none done", got, err, want)
	}
	if k := c.countRecords(q, driver.ResultSucceeded); k != want {
		c.Fatalf("a dry run deleted records: %d succeeded left of %d", k, want)
	}
}
