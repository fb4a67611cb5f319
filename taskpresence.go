package jobq

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/recmarks"
)

// presentTasks returns those of ids that a task of the queue has now: held
// (driver.HeldStore) or live, that is ready, delayed or in flight
// (driver.TaskFinder). ok is false when the backend cannot look live tasks
// up by ID; present is then nil. Held tasks are looked up first: a task
// released from held to live between the two reads is still found, and one
// that ends meanwhile has its record (callers that read records read them
// again after this).
func (q *Queue) presentTasks(ctx context.Context, op string, ids []string) (present map[string]bool, ok bool, err error) {
	finder, ok := q.drv.(driver.TaskFinder)
	if !ok {
		return nil, false, nil
	}
	hs, _ := q.drv.(driver.HeldStore)
	present = map[string]bool{}
	for start := 0; start < len(ids); start += maxResultBatch {
		chunk := ids[start:min(start+maxResultBatch, len(ids))]
		if hs != nil {
			held, err := hs.HeldOf(ctx, chunk)
			if err != nil {
				return nil, true, q.wrap(op, err)
			}
			for _, h := range held {
				present[h.Message.ID] = true
			}
		}
		live, err := finder.FindTasks(ctx, chunk)
		if err != nil {
			return nil, true, q.wrap(op, err)
		}
		for _, id := range live {
			present[id] = true
		}
	}
	return present, true, nil
}

// goneTasks returns those of ids that are neither held nor live and, read
// after the look, have no record of an end: deleted without one (Clear),
// their record expired, or not pushed (yet). A wait for them goes on
// until a task with the ID is pushed (and ends), which the CLI's wait
// says. With marks (push --wait's, see recmarks), a task whose record is
// the one it had before the push is gone too: this run of it was deleted.
// Without, early are those neither held nor live whose record of an end
// was written before since (when set): a wait that counts only ends since
// then waits on for them, though they ended, when the clock of the worker
// that wrote the record is behind the waiter's (or the record is an
// earlier run's and the task was cleared). ok is false when the backend
// cannot look tasks up by ID.
func (q *Queue) goneTasks(ctx context.Context, ids []string, since time.Time, marks recmarks.Set) (gone, early []string, ok bool, err error) {
	const op = "wait"
	store, err := q.resultStore(op)
	if err != nil {
		return nil, nil, false, err
	}
	present, ok, err := q.presentTasks(ctx, op, ids)
	if err != nil || !ok {
		return nil, nil, ok, err
	}
	var missing []string
	for _, id := range ids {
		if !present[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil, nil, true, nil
	}
	recs, err := q.getResults(ctx, op, store, missing)
	if err != nil {
		return nil, nil, true, err
	}
	for i, rec := range recs {
		switch {
		case rec == nil || !rec.State.Final() || (marks != nil && !marks.Ended(missing[i], rec)):
			gone = append(gone, missing[i])
		case marks == nil && rec.UpdatedAt.Before(since):
			early = append(early, missing[i])
		}
	}
	return gone, early, true, nil
}

// markRecords adds to marks the records that the tasks' IDs have now, as a
// push of tasks would give them their IDs, so that a wait after the push
// (WaitOptions.marks) can tell their next ends from these records. An
// invalid task is left out: its push fails.
func (q *Queue) markRecords(ctx context.Context, tasks []*Task, marks recmarks.Set) error {
	const op = "wait"
	store, err := q.resultStore(op)
	if err != nil {
		return err
	}
	omit := omitFor(q.caps)
	ids := make([]string, 0, len(tasks))
	for _, t := range tasks {
		id := t.ID
		if id == "" {
			var err error
			if id, err = taskID(omit.apply(t)); err != nil {
				continue
			}
		}
		if !marks.Has(id) {
			ids = append(ids, id)
		}
	}
	recs, err := q.getResults(ctx, op, store, ids)
	if err != nil {
		return err
	}
	marks.Add(ids, recs)
	return nil
}
