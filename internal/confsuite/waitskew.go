package confsuite

import (
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/recmarks"
)

// workerSkew is how far behind the pusher's clock checkWaitSkewedWorker's
// worker stamps its records.
const workerSkew = -30 * time.Second

// checkWaitSkewedWorker: push --wait's wait (its tasks' records marked
// before the push) reports the ends a worker whose clock is 30 s behind
// the pusher's records, and not the record of an earlier run of a task
// pushed again. A wait that compares a record's time with the push's (less
// a second) waited on for such ends until its timeout. Where tasks can be
// looked up by ID, a task whose record is still the one marked, and that
// is not in the queue, is gone (its run was deleted), not "ended early".
func checkWaitSkewedWorker(c *C) {
	q := c.open()
	c.needResults(q)
	p := fmt.Sprintf("skew-%d-", time.Now().UnixNano())
	again := &jobq.Task{ID: p + "again", Command: "echo conformance skew again"}
	// The record of an earlier run, an hour ago, stored as such a run's
	// settlement would: not by pushing and settling it here, since Service
	// Bus's duplicate detection would drop the push again of its ID. (On
	// Redis, a record stamped earlier than the one it replaces is hidden
	// by it: see docs/reliability.md.)
	earlier := &driver.ResultRecord{ID: again.ID, State: driver.ResultSucceeded, UpdatedAt: time.Now().Add(-time.Hour), ExpiresAt: time.Now().Add(time.Hour)}
	if err := hooks.Driver(q).(driver.ResultStore).PutResults(c.ctx(), []*driver.ResultRecord{earlier}); err != nil {
		c.Fatalf("store the record of an earlier run: %v", err)
	}

	tasks := []*jobq.Task{{ID: again.ID, Command: again.Command}, {ID: p + "fresh", Command: "echo conformance skew fresh"}}
	marks := recmarks.Set{}
	if err := hooks.MarkRecords(c.ctx(), q, tasks, marks); err != nil {
		c.Fatalf("reading the records before the push: %v", err)
	}
	after := time.Now().Add(-time.Second) // push --wait's, on the pusher's clock
	if gone, early, ok, err := hooks.GoneTasks(c.ctx(), q, []string{again.ID}, after, marks); ok && (err != nil || len(gone) != 1 || early != nil) {
		c.Errorf("GoneTasks, with marks, of a task not pushed again whose record is the marked one = %v, %v, %v; want it gone, none early", gone, early, err)
	}
	if _, err := q.PushBatch(c.ctx(), tasks, jobq.PushOptions{}); err != nil {
		c.Fatalf("push: %v", err)
	}
	got := make(chan waitReport, len(tasks)+1)
	go func() {
		opts := hooks.MarkedWait(after, marks).(jobq.WaitOptions)
		err := q.WaitFunc(c.ctx(), []string{tasks[0].ID, tasks[1].ID}, opts, func(r *jobq.Result) error {
			got <- waitReport{r: r}
			return nil
		})
		got <- waitReport{err: err}
	}()
	want := map[string]driver.ResultState{tasks[0].ID: driver.ResultDeadLettered, tasks[1].ID: driver.ResultSucceeded}
	c.settleSkewed(q, workerSkew, want)
	w := &waitReports{c: c, got: got, seen: map[string]driver.ResultState{}}
	for range want {
		w.next("a worker 30 s behind recorded the tasks' ends")
	}
	if fmt.Sprint(w.seen) != fmt.Sprint(want) {
		c.Errorf("WaitFunc reported %v; want %v (the new run's records, not the earlier run's)", w.seen, want)
	}
}

// settleSkewed receives the tasks of states (through q's driver) and
// completes each with a record in its state stamped by a clock skew off
// this machine's, as such a worker's settlement stores it (with the
// settlement where records are native, before it where they are not).
func (c *C) settleSkewed(q *handle, skew time.Duration, states map[string]driver.ResultState) {
	c.Helper()
	d := hooks.Driver(q)
	rs, _ := d.(driver.ResultStore)
	native := level(q, driver.Results) == driver.Native
	left := len(states)
	deadline := time.Now().Add(c.patience())
	for left > 0 && time.Now().Before(deadline) {
		recv, err := d.Receive(c.ctx(), driver.ReceiveParams{Max: left, Visibility: c.longVis(q), Wait: time.Second})
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		for _, r := range recv {
			id := c.receivedID(r)
			rec := &driver.ResultRecord{ID: id, State: states[id], UpdatedAt: time.Now().Add(skew), ExpiresAt: time.Now().Add(time.Hour)}
			params := driver.CompleteParams{Lease: r.Lease}
			if native {
				params.Result = rec
			} else if err := rs.PutResults(c.ctx(), []*driver.ResultRecord{rec}); err != nil {
				c.Fatalf("store the record of %s: %v", id, err)
			}
			if errs := d.Complete(c.ctx(), []driver.CompleteParams{params}); errs != nil && errs[0] != nil {
				c.Fatalf("complete %s: %v", id, errs[0])
			}
			left--
		}
	}
	if left > 0 {
		c.Fatalf("received %d of %d tasks pushed", len(states)-left, len(states))
	}
}

// receivedID is the task ID of r: the driver's, else the body's.
func (c *C) receivedID(r *driver.Received) string {
	if r.ID != "" {
		return r.ID
	}
	t, err := hooks.UnmarshalTask(r.Body)
	if err != nil {
		c.Fatalf("decode a received task: %v", err)
	}
	return t.(*jobq.Task).ID
}
