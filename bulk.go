package jobq

import (
	"context"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Filter selects the tasks that Admin's bulk actions touch: RequeueWhere,
// CancelWhere and PurgeWhere. Every field that is set must match (they
// are ANDed); a task that cannot be decoded (a poison message) matches
// only a filter on State and time. The zero Filter matches everything,
// which CancelWhere and PurgeWhere refuse unless All is set.
type Filter struct {
	// State is where the tasks are: "queued" (ready or delayed, not
	// running) or "dead-lettered"; or, for PurgeWhere only, "succeeded"
	// or "cancelled": the result records of tasks that ended so. Empty
	// means the action's own: dead-lettered for RequeueWhere and
	// PurgeWhere, queued for CancelWhere.
	State string
	// Kind matches a task's Kind exactly.
	Kind string
	// Key matches a task whose ConcurrencyKey or RateLimitKey it is.
	Key string
	// ExitCode matches a dead letter whose last attempt exited with it,
	// from its result record where the queue keeps them, else from its
	// attempt history; or a result record (PurgeWhere of succeeded or
	// cancelled records) whose recorded exit code it is.
	ExitCode *int
	// ErrorContains matches a dead letter whose reason, detail (output
	// tail) or recorded error contains it (case-sensitive); or a result
	// record whose recorded error contains it.
	ErrorContains string
	// Since and Until bound when the task was queued (queued tasks) or
	// dead-lettered (dead letters) or its record was written (result
	// records): Since inclusive, Until exclusive; zero
	// means unbounded. A task whose time the backend cannot tell matches
	// no time bound.
	Since, Until time.Time
	// All must be set to cancel or purge with no other criterion, so that
	// an empty filter never empties a queue by accident.
	All bool
	// DryRun counts what would be touched and changes nothing.
	DryRun bool
	// BatchSize is how many tasks one page reads and one batch changes.
	// Defaults to 500; at most 10000.
	BatchSize int
}

// BulkResult reports what a bulk action did.
type BulkResult struct {
	// Scanned is how many queued tasks or dead letters were read.
	Scanned int64
	// Matched is how many of them matched the filter: on a dry run, how
	// many the action would touch.
	Matched int64
	// Done is how many the action changed: requeued, cancelled (removed,
	// or asked to stop where the backend cannot remove a queued task, see
	// Pending), or purged. Zero on a dry run. It can be less than Matched
	// when tasks moved on meanwhile (a worker took a queued task, another
	// operator requeued a dead letter).
	Done int64
	// Pending is how many of Done were cancels recorded for a worker to
	// carry out (CancelPending) rather than removals.
	Pending int64
	// Partial, when not empty, says why matches may have been left unseen:
	// the backend cannot page through the whole store (BulkActions
	// Emulated) and the window it sees was full.
	Partial string
}

// The states a Filter names.
const (
	stateQueued       = "queued"
	stateDeadLettered = string(driver.ResultDeadLettered)
)

// Batch sizes of the bulk actions.
const (
	defaultBulkBatch = 500
	maxBulkBatch     = 10000
	// maxEmulatedPasses bounds the passes over a window that cannot be
	// paged (BulkActions Emulated).
	maxEmulatedPasses = 1000
)

// bulkAction is one of the three actions on one store.
type bulkAction struct {
	op   string
	dead bool // over dead letters; else over queued tasks
	// once, when set, holds the tasks this run has acted on: an action
	// whose tasks can come back into the store it scans (a requeued task
	// that a worker dead-letters again) skips them, so that one run acts
	// on a task once and its counts are of distinct tasks.
	once *taskSet
	// act changes one batch of matches and returns how many it changed
	// and how many of those are pending cancels.
	act func(ctx context.Context, batch []bulkMatch) (done, pending int64, err error)
}

// bulkMatch is one task that matched.
type bulkMatch struct {
	messageID, taskID string
	stash             *StashRef
}

// RequeueWhere moves the dead letters that f matches back to the queue, as
// RequeueDeadLetters does, one batch at a time: each requeued task's
// result record is reset, so Wait waits for its new run. A run requeues
// each task once: one that a worker dead-letters again while the run goes
// on is left for the next run (the run remembers the tasks it requeued,
// about 40 bytes each). f.State must be
// empty or "dead-lettered" (a cancelled task's message is not kept, so
// it cannot be requeued: push it again).
func (a *Admin) RequeueWhere(ctx context.Context, f Filter) (BulkResult, error) {
	const op = "requeue by filter"
	if err := a.bulkGate(op); err != nil {
		return BulkResult{}, err
	}
	if err := a.checkDeadLetters(op); err != nil {
		return BulkResult{}, err
	}
	if err := f.check(op, stateDeadLettered, false); err != nil {
		return BulkResult{}, err
	}
	if f.state(stateDeadLettered) != stateDeadLettered {
		return BulkResult{}, errorf(errcode.InvalidArgument, op, "requeue takes dead letters (state %s); %s tasks are in the queue already", stateDeadLettered, f.State)
	}
	if err := a.checkExitCodes(op, &f); err != nil {
		return BulkResult{}, err
	}
	return a.bulk(ctx, f, bulkAction{op: op, dead: true, once: newTaskSet(), act: func(ctx context.Context, batch []bulkMatch) (int64, int64, error) {
		n, err := a.q.drv.RequeueDead(ctx, messageIDs(batch))
		return n, 0, a.q.wrapWrite(op, err)
	}})
}

// CancelWhere cancels the queued tasks that f matches, as Cancel does, one
// batch at a time: each is removed and recorded as cancelled (or, where
// the backend cannot remove a queued task, recorded as cancel-requested
// for the worker that receives it). f.State must be empty or "queued";
// running tasks are not matched (cancel them by ID). A filter with no
// criterion needs f.All.
func (a *Admin) CancelWhere(ctx context.Context, f Filter) (BulkResult, error) {
	const op = "cancel by filter"
	if err := a.bulkGate(op); err != nil {
		return BulkResult{}, err
	}
	if err := f.check(op, stateQueued, true); err != nil {
		return BulkResult{}, err
	}
	if f.state(stateQueued) != stateQueued {
		return BulkResult{}, errorf(errcode.InvalidArgument, op, "cancel takes queued tasks (state %s); to delete %s tasks, purge them", stateQueued, f.State)
	}
	if err := a.checkCancel(op); err != nil {
		return BulkResult{}, err
	}
	return a.bulk(ctx, f, a.cancelAction(op))
}

// opPurgeWhere is PurgeWhere's operation name, the one action that takes
// result record states.
const opPurgeWhere = "purge by filter"

// PurgeWhere deletes what f matches, one batch at a time: dead letters
// (f.State empty or "dead-lettered"), as PurgeDeadLetters does, with their
// stashed payloads; queued tasks (f.State "queued"), which are removed
// as CancelWhere removes them, so that a Wait on one ends (cancelled)
// rather than hangs; or result records (f.State "succeeded" or
// "cancelled"), a page of the records' listing at a time, matched on
// ExitCode, ErrorContains and the time the record was written (Since,
// Until), with their stashed values. Records keep no task kind or key,
// so Kind and Key are refused with a record state, and purging a record
// never touches a queued or running task. A filter with no criterion
// needs f.All.
func (a *Admin) PurgeWhere(ctx context.Context, f Filter) (BulkResult, error) {
	const op = opPurgeWhere
	if isRecordState(f.State) {
		return a.purgeRecords(ctx, op, f)
	}
	if err := a.bulkGate(op); err != nil {
		return BulkResult{}, err
	}
	if err := f.check(op, stateDeadLettered, true); err != nil {
		return BulkResult{}, err
	}
	if f.state(stateDeadLettered) == stateQueued {
		if err := a.checkCancel(op); err != nil {
			return BulkResult{}, err
		}
		return a.bulk(ctx, f, a.cancelAction(op))
	}
	if err := a.checkDeadLetters(op); err != nil {
		return BulkResult{}, err
	}
	if err := a.checkExitCodes(op, &f); err != nil {
		return BulkResult{}, err
	}
	q := a.q
	return a.bulk(ctx, f, bulkAction{op: op, dead: true, act: func(ctx context.Context, batch []bulkMatch) (int64, int64, error) {
		n, err := q.drv.PurgeDead(ctx, messageIDs(batch))
		if err != nil {
			return n, 0, q.wrapWrite(op, err)
		}
		var refs []*StashRef
		var taskIDs []string
		for _, m := range batch {
			if m.stash != nil {
				refs, taskIDs = append(refs, m.stash), append(taskIDs, m.taskID)
			}
		}
		q.dropStashed(ctx, q.unqueuedStash(ctx, op, refs, taskIDs)...)
		return n, 0, nil
	}})
}

// checkExitCodes fails a filter on exit codes where the backend keeps
// neither result records nor attempt histories, so that it could match
// nothing.
func (a *Admin) checkExitCodes(op string, f *Filter) error {
	q := a.q
	if f.ExitCode == nil || q.results != nil || q.caps.Level(driver.InPlaceUpdate) == driver.Native {
		return nil
	}
	return &Error{Code: errcode.Unimplemented, Op: op, Queue: q.url,
		Msg: "backend " + q.backend() + " keeps neither result records nor attempt histories, so dead letters' exit codes are unknown: filter on the error text instead (the reason says \"exited with status N\")"}
}

// bulkGate fails on a closed queue or where the backend declares no bulk
// actions, and warns once where they are emulated.
func (a *Admin) bulkGate(op string) error {
	if err := a.q.checkOpen(op); err != nil {
		return err
	}
	return a.q.degrade(op, driver.BulkActions)
}

// checkCancel fails where the backend cannot cancel tasks.
func (a *Admin) checkCancel(op string) error {
	q := a.q
	if _, err := q.resultStore(op); err != nil {
		return err
	}
	if q.caps.Level(driver.Cancel) == driver.Unsupported {
		return q.unsupported(op, driver.Cancel, "cannot cancel tasks")
	}
	return nil
}

// cancelAction cancels a batch of queued tasks by their IDs.
func (a *Admin) cancelAction(op string) bulkAction {
	return bulkAction{op: op, act: func(ctx context.Context, batch []bulkMatch) (done, pending int64, err error) {
		ids := make([]string, 0, len(batch))
		for _, m := range batch {
			if m.taskID != "" {
				ids = append(ids, m.taskID)
			}
		}
		if len(ids) == 0 {
			return 0, 0, nil
		}
		res, err := a.Cancel(ctx, ids...)
		for _, r := range res {
			switch r.Outcome {
			case CancelRemoved:
				done++
			case CancelPending:
				done++
				pending++
			}
		}
		return done, pending, err
	}}
}

func messageIDs(batch []bulkMatch) []string {
	ids := make([]string, len(batch))
	for i, m := range batch {
		ids[i] = m.messageID
	}
	return ids
}

// state is f.State, or def when it is empty.
func (f *Filter) state(def string) string {
	if f.State == "" {
		return def
	}
	return f.State
}

// narrows reports whether f has a criterion beyond its state.
func (f *Filter) narrows() bool {
	return f.Kind != "" || f.Key != "" || f.ExitCode != nil || f.ErrorContains != "" || !f.Since.IsZero() || !f.Until.IsZero()
}

// check validates f for an action whose default state is def; needAll
// says whether a filter without criteria needs All.
func (f *Filter) check(op, def string, needAll bool) error {
	switch st := f.state(def); st {
	case stateQueued, stateDeadLettered:
		if st == stateQueued && (f.ExitCode != nil || f.ErrorContains != "") {
			return errorf(errcode.InvalidArgument, op, "an exit code or error text says how a task ended: it filters dead letters (state %s), not %s tasks", stateDeadLettered, stateQueued)
		}
	case string(driver.ResultSucceeded), string(driver.ResultCancelled):
		if op != opPurgeWhere {
			return errorf(errcode.InvalidArgument, op, "state %s names result records, which only purge deletes: filter on %s or %s", st, stateQueued, stateDeadLettered)
		}
	case string(driver.ResultCancelRequested):
		return errorf(errcode.InvalidArgument, op, "state %s names cancels a worker has still to carry out, which bulk actions leave alone: filter on %s or %s", st, stateQueued, stateDeadLettered)
	default:
		if op == opPurgeWhere {
			return errorf(errcode.InvalidArgument, op, "unknown state %q: use %s, %s, %s or %s", st, stateQueued, stateDeadLettered, driver.ResultSucceeded, driver.ResultCancelled)
		}
		return errorf(errcode.InvalidArgument, op, "unknown state %q: use %s or %s", st, stateQueued, stateDeadLettered)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return errorf(errcode.InvalidArgument, op, "since (%s) is not before until (%s): nothing can match", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	if f.BatchSize < 0 || f.BatchSize > maxBulkBatch {
		return errorf(errcode.InvalidArgument, op, "batch size is %d; use 1 to %d, or 0 for %d", f.BatchSize, maxBulkBatch, defaultBulkBatch)
	}
	if needAll && !f.All && !f.narrows() {
		return f.noFilter(op, def)
	}
	return nil
}

// noFilter is the error of a filter with no criterion and no All.
func (f *Filter) noFilter(op, def string) error {
	if isRecordState(f.State) {
		return errorf(errcode.InvalidArgument, op, "no filter given: that would delete every %s result record; narrow it (exit code, error, time) or say All", f.State)
	}
	return errorf(errcode.InvalidArgument, op, "no filter given: that would touch every %s task; narrow it (kind, key, exit code, error, time) or say All", f.state(def))
}

// matchTime reports whether t is within f's time bounds.
func (f *Filter) matchTime(t time.Time) bool {
	if f.Since.IsZero() && f.Until.IsZero() {
		return true
	}
	if t.IsZero() {
		return false
	}
	return (f.Since.IsZero() || !t.Before(f.Since)) && (f.Until.IsZero() || t.Before(f.Until))
}

// matchTask reports whether a decoded task (nil for a poison message)
// matches f's kind and key.
func (f *Filter) matchTask(t *Task) bool {
	if f.Kind == "" && f.Key == "" {
		return true
	}
	if t == nil {
		return false
	}
	return (f.Kind == "" || t.Kind == f.Kind) && (f.Key == "" || t.ConcurrencyKey == f.Key || t.RateLimitKey == f.Key)
}

// needsRecords reports whether matching a dead letter reads its record.
func (f *Filter) needsRecords() bool { return f.ExitCode != nil || f.ErrorContains != "" }

// matchEnd reports whether a dead letter matches f's exit code and error
// text, from the letter, its decoded task and its result record (nil when
// none).
func (f *Filter) matchEnd(m *driver.DeadMessage, t *Task, rec *Result) bool {
	if f.ExitCode != nil {
		code := lastExitCode(t, rec)
		if code == nil || *code != *f.ExitCode {
			return false
		}
	}
	if s := f.ErrorContains; s != "" {
		hit := strings.Contains(m.Reason, s) || strings.Contains(m.Detail, s)
		if rec != nil {
			hit = hit || strings.Contains(rec.Error, s)
		}
		return hit
	}
	return true
}

// lastExitCode is the exit code of a task's last attempt: its record's, or
// the last one its attempt history holds.
func lastExitCode(t *Task, rec *Result) *int {
	if rec != nil && rec.ExitCode != nil {
		return rec.ExitCode
	}
	if t == nil {
		return nil
	}
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if c := t.Attempts[i].ExitCode; c != nil {
			return c
		}
	}
	return nil
}
