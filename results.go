package jobq

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/recmarks"
)

// Result is the kept outcome of one task: what Queue.Result returns and
// Queue.Wait waits for. Records are kept for the queue's retention (a
// queue policy; 7 days by default).
type Result struct {
	// ID is the task's ID.
	ID string
	// State is how the task ended (or CancelRequested).
	State driver.ResultState
	// ExitCode is a shell task's exit status on its last attempt, 128 + N
	// for a command killed by signal N (as a shell reports it); nil for a
	// Go handler or when the worker stopped the process.
	ExitCode *int
	// Error is why the task did not succeed: the failure that
	// dead-lettered it, or what cancelled it. Empty on success.
	Error string
	// Output is the tail of the task's output on its last attempt.
	Output string
	// Value is what a Go handler returned (worker.HandleResult), as JSON;
	// nil for shell tasks.
	Value json.RawMessage
	// Started and Finished bound the last attempt; zero when unknown.
	Started, Finished time.Time
	// Worker and Host name who ran the last attempt; empty when unknown.
	Worker, Host string
	// Env is the environment label of the worker that ran the last
	// attempt (worker.Options.EnvLabel); empty when unknown.
	Env string
	// Group is the task's group (Task.Group); empty for none.
	Group string
	// DeliveryCount is how many times the task was delivered.
	DeliveryCount int
	// Attempts is the attempt history, oldest first.
	Attempts []Attempt
	// ExpiresAt is when the record will be purged.
	ExpiresAt time.Time
	// Recorded is when the record was written.
	Recorded time.Time
}

// CancelOutcome says what Cancel did to one task.
type CancelOutcome string

// The outcomes of Cancel.
const (
	// CancelRemoved: the task was queued or delayed; it was removed and
	// recorded as Cancelled.
	CancelRemoved CancelOutcome = "removed"
	// CancelPending: the task is running, or the backend cannot remove a
	// queued task by ID (nor tell an unknown ID): a CancelRequested record
	// tells the worker that holds or next receives it to stop it.
	CancelPending CancelOutcome = "requested"
	// CancelNotFound: no task with this ID is queued or running, and none
	// has a final record (the ID is mistyped, or the task is not pushed
	// yet, or its record expired). Nothing is recorded: a task pushed
	// with this ID later runs. Only where the backend removes queued
	// tasks by ID (Cancel native), so can look IDs up; elsewhere such an
	// ID is CancelPending, its request recorded in case a task with it
	// arrives.
	CancelNotFound CancelOutcome = "not-found"
	// CancelTooLate: the task had already ended; its record is unchanged.
	CancelTooLate CancelOutcome = "already-ended"
)

// CancelResult reports what Cancel did to one task.
type CancelResult struct {
	ID      string
	Outcome CancelOutcome
	// State is the task's recorded state after the cancel; empty when it
	// has no record (CancelNotFound).
	State driver.ResultState
}

// resultStore returns the driver's result store, or an Unimplemented error
// naming op.
func (q *Queue) resultStore(op string) (driver.ResultStore, error) {
	if err := q.checkOpen(op); err != nil {
		return nil, err
	}
	if q.results == nil {
		return nil, q.unsupported(op, driver.Results, "keeps no task results")
	}
	if err := q.degrade(op, driver.Results); err != nil {
		return nil, err
	}
	return q.results, nil
}

// keepsRecords fails with FailedPrecondition, naming the policy and how to
// change it, when the queue's results policy keeps no records of tasks
// that end, so that op (a wait, a result) could never answer.
func (q *Queue) keepsRecords(ctx context.Context, op string) error {
	if q.policies.results(ctx) != driver.ResultsNone {
		return nil
	}
	return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url,
		Msg: "the queue's results policy is none: no task keeps a result record, so there is nothing to wait for or read; " +
			"keep them with `jobq QUEUE policy set results all` (or `results failed`, which keeps full records of failures only)"}
}

// stillKeepsRecords is keepsRecords during a wait: the policy became none
// after the wait began (this handle sees a change made elsewhere within
// policyRefresh), so the tasks not reported yet would end without a record
// and the wait would never return.
func (q *Queue) stillKeepsRecords(ctx context.Context, op string) error {
	if q.policies.results(ctx) != driver.ResultsNone {
		return nil
	}
	return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url,
		Msg: "the queue's results policy was set to none during the wait: the tasks not reported yet end without a result record, so the wait stops; " +
			"keep records with `jobq QUEUE policy set results all` (or `results failed`), and tasks that end after that are recorded again"}
}

// unsupported is the Unimplemented error of a call that needs f.
func (q *Queue) unsupported(op string, f driver.Feature, what string) error {
	msg := "backend " + q.backend() + " " + what
	if fb := q.caps.Features[f].Fallback; fb != "" {
		msg += ": " + fb
	}
	return &Error{Code: errcode.Unimplemented, Op: op, Queue: q.url, Msg: msg + " (run `jobq backends` to see which backends support " + string(f) + ")"}
}

// maxResultBatch bounds the records or IDs of one PutResults or GetResults
// call.
const maxResultBatch = 500

// getResults reads the records of ids in chunks of maxResultBatch.
func (q *Queue) getResults(ctx context.Context, op string, store driver.ResultStore, ids []string) ([]*driver.ResultRecord, error) {
	out := make([]*driver.ResultRecord, 0, len(ids))
	for start := 0; start < len(ids); start += maxResultBatch {
		chunk := ids[start:min(start+maxResultBatch, len(ids))]
		recs, err := store.GetResults(ctx, chunk)
		if err != nil {
			return nil, q.wrap(op, err)
		}
		if len(recs) != len(chunk) {
			return nil, &Error{Code: errcode.Internal, Op: op, Queue: q.url,
				Msg: fmt.Sprintf("the backend returned %d result records for %d task IDs", len(recs), len(chunk))}
		}
		out = append(out, recs...)
	}
	return out, nil
}

// putResults stores recs in chunks of maxResultBatch.
func putResults(ctx context.Context, store driver.ResultStore, recs []*driver.ResultRecord) error {
	for start := 0; start < len(recs); start += maxResultBatch {
		if err := store.PutResults(ctx, recs[start:min(start+maxResultBatch, len(recs))]); err != nil {
			return err
		}
	}
	return nil
}

// checkIDs rejects an empty task ID.
func checkIDs(op string, ids []string) error {
	for i, id := range ids {
		if id == "" {
			return errorf(errcode.InvalidArgument, op, "task ID %d of %d is empty", i+1, len(ids))
		}
	}
	return nil
}

// Result returns the result record of task id. It fails with NotFound when
// the task has no record (it has not ended, or its record expired), and
// with Unimplemented when the backend keeps no results. A task that was
// asked to cancel but has not stopped yet has a record in state
// CancelRequested.
func (q *Queue) Result(ctx context.Context, id string) (*Result, error) {
	const op = "result"
	store, err := q.resultStore(op)
	if err != nil {
		return nil, err
	}
	if err := q.keepsRecords(ctx, op); err != nil {
		return nil, err
	}
	if err := checkIDs(op, []string{id}); err != nil {
		return nil, err
	}
	recs, err := q.getResults(ctx, op, store, []string{id})
	if err != nil {
		return nil, err
	}
	if recs[0] == nil {
		return nil, &Error{Code: errcode.NotFound, Op: op, Queue: q.url,
			Msg: fmt.Sprintf("task %s has no result: it has not ended, its ID is unknown, or its record expired (results are kept for the queue's retention)", id)}
	}
	return q.result(ctx, op, recs[0])
}

// Wait waits until every task in ids has ended and returns their results
// in the order of ids. It is WaitFunc collecting the results.
func (q *Queue) Wait(ctx context.Context, ids ...string) ([]*Result, error) {
	byID := make(map[string]*Result, len(ids))
	if err := q.WaitFunc(ctx, ids, WaitOptions{}, func(r *Result) error {
		byID[r.ID] = r
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]*Result, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out, nil
}

// Waiting paces WaitFunc where the backend cannot wake waiters: it polls,
// first after waitPollMin, doubling up to waitPollMax while nothing ends.
// Where it can, each wait on the engine lasts at most waitNotified (a wake
// that was missed costs no more).
const (
	waitPollMin  = 50 * time.Millisecond
	waitPollMax  = 2 * time.Second
	waitNotified = 5 * time.Second
)

// waitReadShare bounds the share of a wait's time spent reading records:
// every round reads the records of all the tasks not ended, so a round
// starts no sooner than waitReadShare times the last read's duration after
// that read ended. Without it, a wait on many tasks that end one after
// another reads them all at every end, work that grows with the square of
// their number; with it, at most 1/(1+waitReadShare) of the wait's time
// reads, and a task's end is reported within a few reads' durations.
const waitReadShare = 10

// WaitOptions tune WaitFunc.
type WaitOptions struct {
	// After, when set, limits the wait to tasks pushed at or after it (take
	// time.Now() before the push). Task IDs are deterministic: a task pushed
	// again after an identical one ended has the same ID, and without After
	// WaitFunc reports the earlier one's record; with it, a record written
	// before After is not reported and WaitFunc waits for the new one's.
	// Records are timed by the clock of the worker that wrote them, so keep
	// the machines' clocks in step.
	After time.Time

	// marks, when set (push --wait, through hooks.MarkedWait), replaces
	// After for the records: a task's end counts when its record differs
	// from the one marks saw before the push, whatever the clocks of the
	// machines. After still bounds the dead letters a wait reads.
	marks recmarks.Set
}

// ends reports whether rec, the record of task id, is an end the wait
// counts: final, and written since the push (per marks, else After).
func (o *WaitOptions) ends(id string, rec *driver.ResultRecord) bool {
	if o.marks != nil {
		return o.marks.Ended(id, rec)
	}
	return rec != nil && rec.State.Final() && !rec.UpdatedAt.Before(o.After)
}

// waitOutage is how long WaitFunc rides out an engine that cannot be
// reached (errcode.Unavailable: a restart, a dropped connection) before it
// returns the error.
const waitOutage = time.Minute

// WaitFunc waits until every task in ids has ended, calling each with its
// result as soon as it is known (in the order they end). A task already
// ended when WaitFunc starts is reported at once. It returns each's first
// error, or ctx's when ctx ends first; tasks keep running either way. A
// repeated ID is reported once. An engine that cannot be reached is
// retried, from waitPollMin to waitPollMax apart, for up to a minute from
// the first failure in a row, so that a wait of hours outlives a restart
// of the engine; the error is returned after that. Every look reads the
// records of all the tasks not ended, and looks are spaced so that reading
// takes at most about a tenth of the wait (waitReadShare). Where the
// backend's records are emulated (the Azure backends), a wait that has gone
// on for 10 s also reads the dead letters, a page every 10 s or more (and
// on Service Bus the recent ones: deadlook.go), and
// reports a task it finds there with no record as DeadLettered, with the
// dead letter's reason, and stores that record: the broker dead-lettered
// it, or a worker that keeps no records did.
func (q *Queue) WaitFunc(ctx context.Context, ids []string, opts WaitOptions, each func(*Result) error) error {
	const op = "wait"
	store, err := q.resultStore(op)
	if err != nil {
		return err
	}
	if err := q.keepsRecords(ctx, op); err != nil {
		return err
	}
	if err := checkIDs(op, ids); err != nil {
		return err
	}
	pending := uniqueIDs(ids)
	waiter, _ := q.drv.(driver.ResultWaiter)
	dead := q.newDeadLook()
	pause := waitPollMin
	var out outage
	var nextRead time.Time // the earliest start of the next round
	for len(pending) > 0 {
		if err := sleepUntil(ctx, nextRead); err != nil {
			return q.wrap(op, err)
		}
		began := time.Now()
		recs, err := q.getResults(ctx, op, store, pending)
		nextRead = time.Now().Add(waitReadShare * time.Since(began))
		if err != nil {
			if out.rideOut(ctx, err) {
				continue
			}
			return err
		}
		out.over()
		left, stale, reported, err := q.reportEnded(ctx, op, pending, recs, &opts, each)
		if err != nil {
			return err
		}
		if reported {
			pause = waitPollMin
		}
		pending = left
		if len(pending) == 0 {
			return nil
		}
		if err := q.stillKeepsRecords(ctx, op); err != nil {
			return err
		}
		if pending, err = q.reportDead(ctx, op, store, dead, pending, &opts, each); err != nil || len(pending) == 0 {
			return err
		}
		if waiter != nil && !stale {
			if err := waiter.WaitResults(ctx, pending, waitNotified); err != nil && !out.rideOut(ctx, err) {
				return q.wrap(op, err)
			}
			continue
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return q.wrap(op, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, waitPollMax)
	}
	return nil
}

// sleepUntil returns at t, or at once when t has passed, or with ctx's
// error when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// outage tracks a run of failures to reach the engine during a wait.
type outage struct {
	since time.Time     // the first failure of the run; zero while the engine answers
	pause time.Duration // the sleep before the next try
}

// rideOut reports whether the wait should try again after err: err says
// the engine cannot be reached, ctx has not ended, and the run of failures
// is younger than waitOutage. It sleeps before it returns true.
func (o *outage) rideOut(ctx context.Context, err error) bool {
	if errcode.Of(err) != errcode.Unavailable || ctx.Err() != nil {
		return false
	}
	if o.since.IsZero() {
		o.since, o.pause = time.Now(), waitPollMin
	} else if time.Since(o.since) >= waitOutage {
		return false
	}
	t := time.NewTimer(o.pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	o.pause = min(2*o.pause, waitPollMax)
	return true
}

// over ends a run of failures: the engine answered.
func (o *outage) over() { o.since = time.Time{} }

// reportEnded calls each with the result of every task in pending whose
// record recs holds (in the same order) shows an end opts counts. It
// returns, in pending's array, the tasks left to wait for; stale is
// whether one of them has the record of an earlier task with its ID (the
// engine's wake would not wait for the new one), and reported whether
// each was called.
func (q *Queue) reportEnded(ctx context.Context, op string, pending []string, recs []*driver.ResultRecord, opts *WaitOptions, each func(*Result) error) (left []string, stale, reported bool, err error) {
	left = pending[:0]
	for i, rec := range recs {
		if !opts.ends(pending[i], rec) {
			stale = stale || (rec != nil && rec.State.Final())
			left = append(left, pending[i])
			continue
		}
		res, err := q.result(ctx, op, rec)
		if err != nil {
			return nil, false, false, err
		}
		if err := each(res); err != nil {
			return nil, false, false, err
		}
		reported = true
	}
	return left, stale, reported, nil
}

// uniqueIDs is ids without repeats, in their order.
func uniqueIDs(ids []string) []string {
	unique := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	return unique
}

// Cancel cancels the tasks ids: a queued or delayed task is removed (where
// the backend can remove by ID) and recorded as Cancelled in the same
// step, so a Cancel cut short leaves no removed task unrecorded (call it
// again to learn each task's outcome); a running one is stopped by its
// worker, terminated then killed as at a time limit, and not retried. A
// task that already ended keeps its record (CancelTooLate). An ID that no
// task has is CancelNotFound, with nothing recorded, where the backend
// removes by ID; elsewhere its request is recorded in case a task with it
// arrives (CancelPending). It fails with Unimplemented where the backend
// keeps no results or cannot cancel.
func (a *Admin) Cancel(ctx context.Context, ids ...string) ([]CancelResult, error) {
	q := a.q
	const op = "cancel"
	store, err := q.resultStore(op)
	if err != nil {
		return nil, err
	}
	if q.caps.Level(driver.Cancel) == driver.Unsupported {
		return nil, q.unsupported(op, driver.Cancel, "cannot cancel tasks")
	}
	if err := q.degrade(op, driver.Cancel); err != nil {
		return nil, err
	}
	if err := checkIDs(op, ids); err != nil || len(ids) == 0 {
		return nil, err
	}
	if err := q.checkLive(ctx, op); err != nil {
		return nil, err
	}
	unique := uniqueIDs(ids)
	dropped, released, err := q.cancelHeld(ctx, op, store, unique)
	if err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		unique = slices.DeleteFunc(unique, func(id string) bool { return dropped[id] })
	}
	remover, native := q.drv.(driver.TaskRemover)
	native = native && q.caps.Level(driver.Cancel) == driver.Native
	if !native {
		if err := q.requestCancels(ctx, op, store, unique); err != nil {
			return nil, err
		}
	}
	recs, err := q.getResults(ctx, op, store, unique)
	if err != nil {
		return nil, err
	}
	state, open := cancelStates(unique, recs)
	for id := range released {
		// Released by a sweep as the cancel recorded it: queued now, with
		// the cancel's record, which the removal below replaces.
		if state[id].Final() {
			state[id] = driver.ResultCancelRequested
			open = append(open, id)
		}
	}
	removed, missing := dropped, map[string]bool{}
	if native && len(open) > 0 {
		if err := q.removeTasks(ctx, op, store, remover, open, state, removed, missing); err != nil {
			return nil, err
		}
	}
	return cancelOutcomes(ids, state, removed, missing), nil
}

// requestCancels is Cancel where the backend cannot remove a queued task,
// nor tell an unknown ID: the cancel request of every ID is stored for the
// worker that holds or next receives the task. It is stored only where
// there is no record, so it never hides an end; reading back tells which
// tasks had ended.
func (q *Queue) requestCancels(ctx context.Context, op string, store driver.ResultStore, ids []string) error {
	now := time.Now()
	asked := make([]*driver.ResultRecord, len(ids))
	for i, id := range ids {
		asked[i] = q.newRecord(ctx, id, driver.ResultCancelRequested, now, &recordDetails{errText: cancelRequestedText})
	}
	if err := putResults(ctx, store, asked); err != nil {
		return q.wrapWrite(op, err)
	}
	return nil
}

// cancelStates is the state of each of ids after Cancel stored its
// requests: the end its record recs holds (in the same order) shows, or
// CancelRequested; open are those that have not ended.
func cancelStates(ids []string, recs []*driver.ResultRecord) (state map[string]driver.ResultState, open []string) {
	state = make(map[string]driver.ResultState, len(ids))
	for i, rec := range recs {
		if rec != nil && rec.State.Final() {
			state[ids[i]] = rec.State
			continue
		}
		state[ids[i]] = driver.ResultCancelRequested
		open = append(open, ids[i])
	}
	return state, open
}

// cancelOutcomes is Cancel's answer for each of ids, from the tasks'
// states and those it removed or found missing.
func cancelOutcomes(ids []string, state map[string]driver.ResultState, removed, missing map[string]bool) []CancelResult {
	out := make([]CancelResult, len(ids))
	for i, id := range ids {
		switch st := state[id]; {
		case removed[id]:
			out[i] = CancelResult{ID: id, Outcome: CancelRemoved, State: driver.ResultCancelled}
		case st.Final():
			out[i] = CancelResult{ID: id, Outcome: CancelTooLate, State: st}
		case missing[id]:
			out[i] = CancelResult{ID: id, Outcome: CancelNotFound}
		default:
			out[i] = CancelResult{ID: id, Outcome: CancelPending, State: driver.ResultCancelRequested}
		}
	}
	return out
}

// cancelRequestedText is the error of a CancelRequested record.
const cancelRequestedText = "cancel requested: the worker that holds this task, or next receives a task with this ID, stops it"

// groupsOf returns the groups of those of ids that are live tasks in a
// group, for the records of the tasks Cancel removes (a task's group is
// in its message, which only the removal sees). Where the driver cannot
// tell, or the read fails (logged), it returns none: the records then
// name no group, and the group's counts, kept by the driver, are right all
// the same.
func (q *Queue) groupsOf(ctx context.Context, ids []string) map[string]string {
	f, ok := q.drv.(driver.TaskGroupFinder)
	if !ok || q.caps.Level(driver.Groups) != driver.Native {
		return nil
	}
	groups, err := f.FindTaskGroups(ctx, ids)
	if err != nil {
		q.log.Warn("jobq: could not read the groups of the tasks to cancel; their records name no group", "error", err)
		return nil
	}
	return groups
}

// removeTasks is Cancel where the backend removes queued tasks by ID: the
// driver removes the open tasks that are queued or delayed and stores
// their Cancelled records, and stores the CancelRequested records of
// those running, in one step (driver.TaskRemover), so a lost answer or a
// crash leaves no removed task without its end (a Wait would hang on it)
// and no record for an ID that no task has; a cancel asked again answers
// for the state that step left. It marks the tasks removed, and in
// missing those that are neither queued nor running. A task that ended
// between Cancel's read of the records and the removal is neither: the
// records of those not removed are read again, and an end found is put
// in state (the cancel came too late).
func (q *Queue) removeTasks(ctx context.Context, op string, store driver.ResultStore, remover driver.TaskRemover, open []string, state map[string]driver.ResultState, removed, missing map[string]bool) error {
	groups := q.groupsOf(ctx, open)
	at := time.Now()
	done := make([]*driver.ResultRecord, len(open))
	asked := make([]*driver.ResultRecord, len(open))
	for i, id := range open {
		done[i] = q.newRecord(ctx, id, driver.ResultCancelled, at, &recordDetails{errText: "cancelled while it waited in the queue", group: groups[id]})
		asked[i] = q.newRecord(ctx, id, driver.ResultCancelRequested, at, &recordDetails{errText: cancelRequestedText})
	}
	gone, held, err := remover.RemoveTasks(ctx, done, asked)
	if err != nil {
		return q.wrapWrite(op, fmt.Errorf("remove the queued tasks (the removal and its records are one step, made or not: cancel again to see what became of each): %w", err))
	}
	running := make(map[string]bool, len(held))
	for _, id := range held {
		running[id] = true
	}
	for _, id := range gone {
		removed[id] = true
	}
	var left []string
	for _, id := range open {
		if !removed[id] {
			left = append(left, id)
		}
	}
	if len(left) == 0 {
		return nil
	}
	recs, err := q.getResults(ctx, op, store, left)
	if err != nil {
		return err
	}
	for i, id := range left {
		switch rec := recs[i]; {
		case rec != nil && rec.State.Final():
			state[id] = rec.State
		case !running[id]:
			missing[id] = true
		}
	}
	return nil
}

// cancelRequested returns those of ids whose cancel was asked for and that
// have not ended: what a worker polls for the tasks it runs, in one call.
// It is always empty where the backend keeps no results (nothing can ask
// for a cancel there).
//
// pushed, when not nil, holds when each task's message was pushed (zero
// when unknown). Where Cancel is Native a request is recorded only for a
// task in flight, so one written before the message was pushed (less
// staleCancelSlack, for the clocks) was for an earlier task with this ID
// that ended by itself without a record over the request (results none):
// it is not for this one, and is ignored.
func (q *Queue) cancelRequested(ctx context.Context, ids []string, pushed []time.Time) ([]string, error) {
	const op = "cancel-requested"
	if err := q.checkOpen(op); err != nil {
		return nil, err
	}
	if q.results == nil || len(ids) == 0 || q.caps.Level(driver.Cancel) == driver.Unsupported {
		return nil, nil
	}
	recs, err := q.getResults(ctx, op, q.results, ids)
	if err != nil {
		return nil, err
	}
	native := q.caps.Level(driver.Cancel) == driver.Native
	var out []string
	for i, rec := range recs {
		if rec == nil || rec.State != driver.ResultCancelRequested {
			continue
		}
		if native && pushed != nil && !pushed[i].IsZero() && rec.UpdatedAt.Before(pushed[i].Add(-staleCancelSlack)) {
			continue
		}
		out = append(out, ids[i])
	}
	return out, nil
}

// staleCancelSlack is how far the clock of the process that asked for a
// cancel may lag the engine's, which stamped the push (cancelRequested):
// generous, since a request ignored for skew would be a cancel lost, while
// a stale one needs its ID pushed again within the slack to do harm.
const staleCancelSlack = time.Minute

// PurgeResults deletes the result records whose retention has passed and
// returns how many it deleted. Workers call it now and then; where the
// engine expires records itself, or the backend keeps none, it returns 0.
func (a *Admin) PurgeResults(ctx context.Context) (int64, error) {
	q := a.q
	const op = "purge-results"
	if err := q.checkOpen(op); err != nil {
		return 0, err
	}
	if q.results == nil {
		return 0, nil
	}
	n, err := q.results.PurgeResults(ctx, time.Now())
	return n, q.wrapWrite(op, err)
}

// ResultDetails are what a worker tells the result record about a task's
// last attempt, beyond its attempt history: the shell command's output
// tail and exit code, or a Go handler's return value.
type ResultDetails struct {
	// ExitCode is the shell command's exit status; nil when none.
	ExitCode *int
	// Output is the tail of the command's output; the record keeps its
	// last 1 KiB when the task succeeds and its last 64 KiB otherwise
	// (docs/results.md).
	Output string
	// Value is a Go handler's return value as JSON. Bytes that are not
	// valid JSON are kept as a JSON string.
	Value json.RawMessage
}

// SetResult attaches d to the result record this envelope's settlement
// writes (Complete, DeadLetter, Fail when it dead-letters, or Cancel).
// Call it before settling; the last call wins. Where the backend keeps no
// results it has no effect.
func (e *Envelope) SetResult(d ResultDetails) {
	if len(d.Value) > 0 && !json.Valid(d.Value) {
		s, _ := json.Marshal(string(d.Value))
		d.Value = s
	}
	e.mu.Lock()
	e.result = &d
	e.mu.Unlock()
}

// cancelRequested reports whether a cancel was asked for this task (see
// Admin.Cancel): the worker should stop it and settle it with Cancel.
func (e *Envelope) cancelRequested(ctx context.Context) (bool, error) {
	ids, err := e.q.cancelRequested(ctx, []string{e.Task.ID}, []time.Time{e.EnqueuedAt})
	return len(ids) > 0, err
}

// Cancel settles a task that was stopped because a cancel was asked for
// it: the message is deleted, not retried, and the result record says
// Cancelled with reason as its error. It is Complete in every other
// respect (LockLost when the lease was lost).
func (e *Envelope) Cancel(ctx context.Context, reason string) error {
	if reason == "" {
		reason = "cancelled"
	}
	return e.complete(ctx, "cancel", e.recordOf(ctx, driver.ResultCancelled, reason, ""), driver.GroupCancelled)
}
