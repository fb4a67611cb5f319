package jobq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// A task pushed with Task.After or Task.AfterGroups, and a group's step
// (Admin.ThenGroup), is held (driver.HeldStore): stored beside the queue,
// unclaimable, until a sweep (sweep.go) finds its parents ended and
// releases it as an ordinary message, or finds one failed and cancels it.
// Nothing of this reaches a task without them: the push of a batch with
// no dependency takes the path it always took.

// hasDeps reports whether a task of tasks names a parent.
func hasDeps(tasks []*Task) bool {
	for _, t := range tasks {
		if t != nil && (len(t.After) > 0 || len(t.AfterGroups) > 0) {
			return true
		}
	}
	return false
}

// heldStore returns the driver's held store and the result store a
// sweep reads parents' ends from, or the error of op where the queue
// cannot hold tasks: the backend lacks the dependencies feature, keeps no
// results, or the queue's results policy keeps no records.
func (q *Queue) heldStore(ctx context.Context, op string) (driver.HeldStore, driver.ResultStore, error) {
	if err := q.checkOpen(op); err != nil {
		return nil, nil, err
	}
	hs, ok := q.drv.(driver.HeldStore)
	if !ok || q.caps.Level(driver.Dependencies) == driver.Unsupported {
		return nil, nil, q.unsupported(op, driver.Dependencies, "cannot hold a task until others end (dependencies and group steps)")
	}
	if q.results == nil {
		return nil, nil, q.unsupported(op, driver.Results, "keeps no task results, which dependencies need to know how a parent ended")
	}
	if q.policies.results(ctx) == driver.ResultsNone {
		return nil, nil, &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url,
			Msg: "dependencies and group steps need result records (a parent's success is read from its record), but the queue's results policy is none; " +
				"keep them with `jobq QUEUE policy set results all` (or `results failed`)"}
	}
	if err := q.degrade(op, driver.Dependencies); err != nil {
		return nil, nil, err
	}
	return hs, q.results, nil
}

// checkNoRecordsNeeded fails with FailedPrecondition when a held task
// waits for a parent, by ID, that has not ended: its release reads the
// parent's success from its result record, which the results policy none
// would not keep, so the task would stay held for good. op is the policy
// change being refused. Where the queue cannot hold tasks it does nothing.
func (q *Queue) checkNoRecordsNeeded(ctx context.Context, op string) error {
	hs, ok := q.drv.(driver.HeldStore)
	if !ok || q.results == nil || q.caps.Level(driver.Dependencies) == driver.Unsupported {
		return nil
	}
	cursor := ""
	for {
		page, next, err := hs.ListHeld(ctx, cursor, sweepPage)
		if err != nil {
			return q.wrap(op, err)
		}
		if held, parent, err := q.heldOnOpenParent(ctx, op, page); err != nil || held != "" {
			if err != nil {
				return err
			}
			return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url,
				Msg: fmt.Sprintf("results none would keep no record of task %s, and held task %s runs only once that record says it succeeded, so it would stay held for good; "+
					"set it once the held tasks are released, or cancel them (`jobq QUEUE cancel %s`)", parent, held, held)}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// heldOnOpenParent returns a held task of page and the parent it names by
// ID that has not ended (no final record); "" when there is none.
func (q *Queue) heldOnOpenParent(ctx context.Context, op string, page []*driver.HeldMessage) (held, parent string, err error) {
	var ids []string
	for _, h := range page {
		ids = append(ids, h.After...)
	}
	if len(ids) == 0 {
		return "", "", nil
	}
	recs, err := q.getResults(ctx, op, q.results, uniqueIDs(ids))
	if err != nil {
		return "", "", err
	}
	ended := make(map[string]bool, len(recs))
	for _, r := range recs {
		if r != nil && r.State.Final() {
			ended[r.ID] = true
		}
	}
	for _, h := range page {
		for _, p := range h.After {
			if !ended[p] {
				return h.Message.ID, p, nil
			}
		}
	}
	return "", "", nil
}

// checkAfter refuses parents no backend can keep: too many, an empty or
// invalid ID, an invalid group name.
func checkAfter(op string, t *Task) error {
	if t == nil {
		return errorf(errcode.InvalidArgument, op, "task is nil")
	}
	if n := len(t.After) + len(t.AfterGroups); n > driver.MaxAfter {
		return errorf(errcode.InvalidArgument, op, "task names %d parents (after and after-group); the limit is %d: group the parents and depend on the group", n, driver.MaxAfter)
	}
	for _, p := range t.After {
		if p == "" {
			return errorf(errcode.InvalidArgument, op, "an after ID is empty: name each parent task by its ID")
		}
		if err := checkTextField("after ID", p); err != nil {
			return err
		}
	}
	for _, g := range t.AfterGroups {
		if err := validGroupName(op, g); err != nil {
			return err
		}
	}
	return nil
}

// pushDeps is PushBatch of a batch in which some tasks name parents: the
// others are pushed first, then those are held, each with require.
func (q *Queue) pushDeps(ctx context.Context, tasks []*Task, opts PushOptions, require driver.HeldRequire) ([]PushResult, error) {
	const op = "push"
	if opts.UniqueFor != 0 || opts.SkipSucceeded {
		return nil, errorf(errcode.InvalidArgument, op, "unique-for and skip-succeeded cannot be combined with dependencies (after, after-group, then): push the tasks with dependencies apart")
	}
	hs, rs, err := q.heldStore(ctx, op)
	if err != nil {
		return nil, err
	}
	for _, t := range tasks {
		if err := checkAfter(op, t); err != nil {
			return nil, err
		}
	}
	msgs, created, err := q.prepareAll(ctx, tasks)
	if err != nil {
		return nil, err
	}
	if err := q.checkParents(ctx, op, rs, tasks, msgs, require); err != nil {
		q.dropRefused(ctx, created...)
		return nil, err
	}
	var plain, held []int
	for i, t := range tasks {
		if len(t.After) > 0 || len(t.AfterGroups) > 0 {
			held = append(held, i)
		} else {
			plain = append(plain, i)
		}
	}
	out := make([]PushResult, len(tasks))
	if len(plain) > 0 {
		pm, pc := pick(msgs, plain), pickRefs(created, plain)
		rs, err := q.pushMsgs(ctx, pm, pc, opts)
		for k, r := range rs {
			out[plain[k]] = r
		}
		if err != nil {
			q.dropRefused(ctx, pickRefs(created, held)...)
			return storedPrefix(out, spreadErr(err, plain, held, len(tasks)))
		}
	}
	if err := q.hold(ctx, hs, tasks, msgs, held, require, out); err != nil {
		return storedPrefix(out, err)
	}
	return out, nil
}

// storedPrefix returns, with err, the results of the tasks before the
// first that err, a *BatchError, says was not stored: PushBatch's
// convention for a batch stored in part.
func storedPrefix(out []PushResult, err error) ([]PushResult, error) {
	var be *BatchError
	if !errors.As(err, &be) {
		return nil, err
	}
	n := 0
	for n < len(be.Errs) && be.Errs[n] == nil {
		n++
	}
	return out[:n], err
}

// hold stores the held tasks tasks[idx] (encoded as msgs) in chunks of
// the backend's batch limit, filling out.
func (q *Queue) hold(ctx context.Context, hs driver.HeldStore, tasks []*Task, msgs []*driver.Message, idx []int, require driver.HeldRequire, out []PushResult) error {
	const op = "push"
	now := time.Now()
	hms := make([]*driver.HeldMessage, len(idx))
	for k, i := range idx {
		hms[k] = &driver.HeldMessage{Message: *msgs[i], After: tasks[i].After, AfterGroups: tasks[i].AfterGroups, Require: require, Created: now}
	}
	if err := q.clearStaleCancels(ctx, hms); err != nil {
		errs := make([]error, len(out))
		for _, i := range idx {
			errs[i] = err
		}
		return &BatchError{Errs: errs}
	}
	stampTrace(ctx, pick(msgs, idx))
	for k := range hms {
		hms[k].Message.TraceParent = msgs[idx[k]].TraceParent
	}
	chunk := len(hms)
	if q.caps.MaxPushBatch > 0 && chunk > q.caps.MaxPushBatch {
		chunk = q.caps.MaxPushBatch
	}
	for start := 0; start < len(hms); start += chunk {
		end := min(start+chunk, len(hms))
		rs, err := hs.Hold(ctx, hms[start:end])
		if err == nil && len(rs) != end-start {
			err = fmt.Errorf("the backend returned %d results for %d held tasks", len(rs), end-start)
		}
		if err != nil {
			werr := q.wrap(op, err)
			if driver.AppliedOf(err, q.drv.ErrorCode(err)) != driver.NotApplied {
				werr = markMaybeApplied(werr)
			}
			errs := make([]error, len(out))
			for k := start; k < len(idx); k++ {
				errs[idx[k]] = werr
			}
			return &BatchError{Errs: errs}
		}
		for k, r := range rs {
			out[idx[start+k]] = PushResult{ID: hms[start+k].Message.ID, MessageID: r.MessageID, Duplicate: r.Duplicate, Position: -1}
		}
	}
	return nil
}

// clearStaleCancels deletes the cancelled result records of the IDs about
// to be held: they are an earlier task's with the same ID (a step
// replaced, a sweep pushed again). The sweep reads a held task's own
// cancelled record as a cancel cut short before its drop, so one left
// from before would cancel the new task.
func (q *Queue) clearStaleCancels(ctx context.Context, hms []*driver.HeldMessage) error {
	const op = "push"
	del, ok := q.drv.(driver.ResultDeleter)
	if !ok || q.results == nil {
		return nil
	}
	ids := make([]string, len(hms))
	for i, h := range hms {
		ids[i] = h.Message.ID
	}
	recs, err := q.getResults(ctx, op, q.results, ids)
	if err != nil {
		return err
	}
	var stale []string
	for i, r := range recs {
		if r != nil && r.State == driver.ResultCancelled {
			stale = append(stale, ids[i])
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if _, err := del.DeleteResults(ctx, stale); err != nil {
		return q.wrap(op, err)
	}
	return nil
}

// spreadErr is the *BatchError of a batch whose plain tasks (by index)
// failed with err, a *BatchError over them, before its held ones were
// held.
func spreadErr(err error, plain, held []int, n int) error {
	var be *BatchError
	if !errors.As(err, &be) {
		return err
	}
	errs := make([]error, n)
	for k, i := range plain {
		if k < len(be.Errs) {
			errs[i] = be.Errs[k]
		}
	}
	notSent := errorf(errcode.FailedPrecondition, "push", "not held: a task it may depend on was not stored")
	for _, i := range held {
		errs[i] = notSent
	}
	return &BatchError{Errs: errs}
}

func pick(msgs []*driver.Message, idx []int) []*driver.Message {
	out := make([]*driver.Message, len(idx))
	for k, i := range idx {
		out[k] = msgs[i]
	}
	return out
}

func pickRefs(refs []*StashRef, idx []int) []*StashRef {
	if refs == nil {
		return nil
	}
	out := make([]*StashRef, len(idx))
	for k, i := range idx {
		out[k] = refs[i]
	}
	return out
}

// checkParents refuses a batch in which a task names a parent that no
// task has (neither in the batch, nor held, nor live, nor with a result
// record), a parent that was dead-lettered or cancelled already (the
// task could never run), an unknown group, or tasks that depend on each
// other in a cycle. A parent that succeeded already counts as met. Unless
// require is RequireEnded, a group that ended with a task dead-lettered or
// cancelled is refused too, as the sweep would cancel the task.
func (q *Queue) checkParents(ctx context.Context, op string, rs driver.ResultStore, tasks []*Task, msgs []*driver.Message, require driver.HeldRequire) error {
	inBatch := make(map[string]int, len(msgs))
	groups := map[string]bool{}
	for i, m := range msgs {
		inBatch[m.ID] = i
		if m.Group != "" {
			groups[m.Group] = true
		}
	}
	if err := findCycle(op, tasks, msgs, inBatch); err != nil {
		return err
	}
	var outside []string
	seen := map[string]bool{}
	for _, t := range tasks {
		for _, p := range t.After {
			if _, in := inBatch[p]; !in && !seen[p] {
				seen[p] = true
				outside = append(outside, p)
			}
		}
	}
	if err := q.checkKnown(ctx, op, rs, outside); err != nil {
		return err
	}
	for i, t := range tasks {
		if len(t.AfterGroups) > 0 && q.groups == nil {
			return q.unsupported(op, driver.Groups, "cannot count tasks by group, which after-group needs")
		}
		for _, g := range t.AfterGroups {
			if g == t.Group {
				return errorf(errcode.InvalidArgument, op, "task %s is in group %q and waits for that group's end, which it would never reach: put it in another group, or in none", msgs[i].ID, g)
			}
			if groups[g] {
				continue
			}
			if err := q.checkAfterGroup(ctx, op, g, msgs[i].ID, require); err != nil {
				return err
			}
			groups[g] = true
		}
	}
	return nil
}

// checkAfterGroup refuses group g, named by task id's after-group, when
// the queue has no such group, or, unless require is RequireEnded, when it
// ended with a task dead-lettered or cancelled (the sweep would cancel the
// task).
func (q *Queue) checkAfterGroup(ctx context.Context, op, g, id string, require driver.HeldRequire) error {
	c, err := q.groups.GroupCounts(ctx, g)
	if err != nil {
		return q.wrap(op, err)
	}
	if c == nil {
		return &Error{Code: errcode.NotFound, Op: op, Queue: q.url,
			Msg: fmt.Sprintf("after-group %q: no group of this name in the queue (list them with `jobq QUEUE groups`); push its tasks first, or in the same batch", g)}
	}
	if require == driver.RequireEnded || !c.Done() || c.DeadLettered+c.Cancelled == 0 {
		return nil
	}
	fix := "requeue its dead letters first (`jobq QUEUE dlq list` lists them), or push without it"
	if c.Cancelled > 0 {
		fix = "a cancelled task cannot be requeued: push the group's tasks again in a new group, or push without it"
	}
	if strings.HasPrefix(id, thenPrefix) {
		fix = "--then-if always runs a step whatever the outcome"
	}
	tasks := "tasks"
	if c.Pushed == 1 {
		tasks = "task"
	}
	return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url,
		Msg: fmt.Sprintf("after-group %q: the group ended with %d of %d %s dead-lettered and %d cancelled, so a task after it could never run; %s", g, c.DeadLettered, c.Pushed, tasks, c.Cancelled, fix)}
}

// checkKnown refuses the first of ids (parents outside the batch) that no
// task has, or that ended without succeeding.
func (q *Queue) checkKnown(ctx context.Context, op string, rs driver.ResultStore, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	recs, err := q.getResults(ctx, op, rs, ids)
	if err != nil {
		return err
	}
	// A parent whose record says it failed may have been pushed again
	// since (it is held or live now): its dependant waits for that run.
	var rest, failed []string
	state := map[string]driver.ResultState{}
	for i, r := range recs {
		switch {
		case r == nil:
			rest = append(rest, ids[i])
		case r.State == driver.ResultDeadLettered || r.State == driver.ResultCancelled:
			failed = append(failed, ids[i])
			state[ids[i]] = r.State
		}
	}
	known, ok, err := q.presentTasks(ctx, op, append(slices.Clip(rest), failed...))
	if err != nil {
		return err
	}
	for _, id := range failed {
		if !known[id] {
			return q.failedParentErr(op, id, state[id])
		}
	}
	if !ok {
		// The backend cannot look queued tasks up by ID: a parent without
		// a record is taken as queued (declared in its dependencies
		// fallback).
		return nil
	}
	for _, id := range rest {
		if !known[id] {
			return &Error{Code: errcode.InvalidArgument, Op: op, Queue: q.url,
				Msg: fmt.Sprintf("after %s: no task with this ID is queued, running, held or recorded in this queue; push the parent first (or in the same batch), or fix the ID", id)}
		}
	}
	return nil
}

// failedParentErr is the refusal of parent id, which ended in state
// (dead-lettered or cancelled) and is not queued again.
func (q *Queue) failedParentErr(op, id string, state driver.ResultState) error {
	if state == driver.ResultDeadLettered {
		// dlq requeue takes the dead letter's message ID, which only a
		// scan of the dead letters finds; show does that scan.
		return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url,
			Msg: fmt.Sprintf("after %s: that task was dead-lettered already, so a task after it could never run; requeue it first with `jobq QUEUE dlq requeue MESSAGE_ID` (`jobq QUEUE show %s` prints its dead letter's message ID), push it again, or push without it", id, id)}
	}
	return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url,
		Msg: fmt.Sprintf("after %s: that task was cancelled, so a task after it could never run; a cancelled task cannot be requeued: push the parent again (before this task, or in the same push), or push without it", id)}
}

// findCycle refuses tasks of the batch that depend on themselves, directly
// or through others of the batch, naming one task on the cycle. (A cycle
// cannot close through a task stored earlier: its parents were known when
// it was pushed, so none of them is pushed now.)
func findCycle(op string, tasks []*Task, msgs []*driver.Message, inBatch map[string]int) error {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(tasks))
	type frame struct{ i, next int }
	for root := range tasks {
		if state[root] != unseen || len(tasks[root].After) == 0 {
			continue
		}
		stack := []frame{{i: root}}
		state[root] = onPath
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			after := tasks[f.i].After
			if f.next == len(after) {
				state[f.i] = done
				stack = stack[:len(stack)-1]
				continue
			}
			p := after[f.next]
			f.next++
			j, in := inBatch[p]
			if !in {
				continue
			}
			switch state[j] {
			case onPath:
				var cycle []string
				for k := range stack {
					if stack[k].i == j {
						for _, fr := range stack[k:] {
							cycle = append(cycle, msgs[fr.i].ID)
						}
						break
					}
				}
				cycle = append(cycle, p)
				return &Error{Code: errcode.InvalidArgument, Op: op,
					Msg: fmt.Sprintf("task %s is on a cycle of dependencies (%s), so it could never run; remove one of these after IDs",
						p, strings.Join(cycle, " after "))}
			case unseen:
				state[j] = onPath
				stack = append(stack, frame{i: j})
			}
		}
	}
	return nil
}

// cancelHeld is Admin.Cancel of the held tasks among ids: each gets its
// cancelled record, then is dropped (a sweep finishes a drop cut short
// after the record). It returns the IDs it dropped, and those a sweep
// released between the two (queued now, with the cancelled record); none
// where the backend cannot hold tasks.
func (q *Queue) cancelHeld(ctx context.Context, op string, store driver.ResultStore, ids []string) (dropped, released map[string]bool, err error) {
	dropped, released = map[string]bool{}, map[string]bool{}
	hs, ok := q.drv.(driver.HeldStore)
	if !ok || q.caps.Level(driver.Dependencies) == driver.Unsupported {
		return dropped, released, nil
	}
	var held []*driver.HeldMessage
	for start := 0; start < len(ids); start += maxResultBatch {
		got, err := hs.HeldOf(ctx, ids[start:min(start+maxResultBatch, len(ids))])
		if err != nil {
			return nil, nil, q.wrap(op, err)
		}
		held = append(held, got...)
	}
	if len(held) == 0 {
		return dropped, released, nil
	}
	now := time.Now()
	recs := make([]*driver.ResultRecord, len(held))
	hids := make([]string, len(held))
	for i, h := range held {
		hids[i] = h.Message.ID
		recs[i] = q.newRecord(ctx, h.Message.ID, driver.ResultCancelled, now, &recordDetails{errText: "cancelled before it ran (it was held, waiting for its parents)", group: h.Message.Group})
	}
	if err := putResults(ctx, store, recs); err != nil {
		return nil, nil, q.wrap(op, err)
	}
	got, err := hs.Drop(ctx, hids)
	if err != nil {
		return nil, nil, q.wrap(op, err)
	}
	for _, id := range got {
		dropped[id] = true
	}
	for _, id := range hids {
		if !dropped[id] {
			released[id] = true
		}
	}
	return dropped, released, nil
}

// heldTask returns the held task with ID id, nil when none is held under
// it or the backend cannot hold tasks; op names a failure.
func (q *Queue) heldTask(ctx context.Context, op, id string) (*driver.HeldMessage, error) {
	hs, ok := q.drv.(driver.HeldStore)
	if !ok || q.caps.Level(driver.Dependencies) == driver.Unsupported {
		return nil, nil
	}
	held, err := hs.HeldOf(ctx, []string{id})
	if err != nil {
		return nil, q.wrap(op, err)
	}
	for _, h := range held {
		if h.Message.ID == id {
			return h, nil
		}
	}
	return nil, nil
}
