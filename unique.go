package jobq

import (
	"context"
	"errors"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// checkUniqueFor checks PushOptions.UniqueFor and SkipSucceeded before
// anything is prepared: the result store to read, nil when neither is set.
func (q *Queue) checkUniqueFor(ctx context.Context, op string, opts PushOptions) (driver.ResultStore, error) {
	what := "unique-for"
	if opts.UniqueFor == 0 {
		what = "skip-succeeded"
	}
	switch {
	case opts.UniqueFor == 0 && !opts.SkipSucceeded:
		return nil, nil
	case opts.UniqueFor < 0:
		return nil, errorf(errcode.InvalidArgument, op, "PushOptions.UniqueFor is negative (%s): give a window of at least one second, or 0 for none", opts.UniqueFor)
	case q.results == nil:
		return nil, q.unsupported(op, driver.Results, "keeps no task results, which "+what+" needs to know which tasks ran")
	case q.policies.results(ctx) == driver.ResultsNone:
		return nil, &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url,
			Msg: what + " needs result records, but the queue's results policy is none (no task keeps one); keep them with `jobq QUEUE policy set results all` (or `results failed`)"}
	}
	if err := q.degrade(op, driver.Results); err != nil {
		return nil, err
	}
	return q.results, nil
}

// skipOf says what the push does with a task whose result record is r:
// dup when UniqueFor refuses it, skip when SkipSucceeded leaves it out.
func skipOf(r *driver.ResultRecord, opts PushOptions, since time.Time) (dup, skip bool) {
	switch {
	case r == nil:
		return false, false
	case opts.SkipSucceeded && r.State == driver.ResultSucceeded:
		return false, true
	case opts.UniqueFor > 0 && r.State.Final() && !r.UpdatedAt.Before(since):
		return true, false
	}
	return false, false
}

// pushUnique pushes the msgs whose task did not end within opts.UniqueFor
// nor succeeded (with opts.SkipSucceeded), per their result records (one
// read per batch), and reports the others as duplicates or skipped. A *BatchError from the push is spread over all msgs: a
// duplicate after the stored prefix is not stored either.
func (q *Queue) pushUnique(ctx context.Context, store driver.ResultStore, msgs []*driver.Message, created []*StashRef, opts PushOptions) ([]PushResult, error) {
	const op = "push"
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	recs, err := q.getResults(ctx, op, store, ids)
	if err != nil {
		q.dropRefused(ctx, created...)
		return nil, err
	}
	since := time.Now().Add(-opts.UniqueFor)
	dup, skip := make([]bool, len(msgs)), make([]bool, len(msgs))
	var kept []*driver.Message
	var keptCreated, dropped []*StashRef
	for i, r := range recs {
		var obj *StashRef
		if created != nil {
			obj = created[i]
		}
		if dup[i], skip[i] = skipOf(r, opts, since); dup[i] || skip[i] {
			dup[i] = true
			if obj != nil {
				dropped = append(dropped, obj) // written by this push: nothing else refers to it
			}
			continue
		}
		kept = append(kept, msgs[i])
		keptCreated = append(keptCreated, obj)
	}
	q.dropRefused(ctx, dropped...)
	if len(kept) == len(msgs) {
		return q.pushMsgs(ctx, msgs, created, opts)
	}
	if keptCreated != nil && !hasRef(keptCreated) {
		keptCreated = nil
	}
	res, err := q.pushMsgs(ctx, kept, keptCreated, opts)
	out := make([]PushResult, 0, len(msgs))
	k := 0
	for i, m := range msgs {
		if dup[i] {
			out = append(out, PushResult{ID: m.ID, Duplicate: !skip[i], Skipped: skip[i], Position: -1})
			continue
		}
		if k == len(res) {
			break // the first task not known to be stored
		}
		out = append(out, res[k])
		k++
	}
	var be *BatchError
	if err == nil || !errors.As(err, &be) {
		return out, err
	}
	errs := make([]error, len(msgs))
	notSent := errorf(errcode.FailedPrecondition, op, "not pushed: a task before it in the batch was not stored")
	for i, j := len(out), k; i < len(msgs); i++ {
		if dup[i] {
			errs[i] = notSent
			continue
		}
		errs[i] = be.Errs[j]
		j++
	}
	return out, &BatchError{Errs: errs}
}

// hasRef reports whether refs holds a stash object.
func hasRef(refs []*StashRef) bool {
	for _, r := range refs {
		if r != nil {
			return true
		}
	}
	return false
}
