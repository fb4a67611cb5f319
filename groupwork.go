package jobq

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
)

// GroupWork is what the ended tasks of a group cost in worker time, added
// up from their result records' attempt histories: the per-group form of
// the work totals the workers report per environment (WorkerInfo).
type GroupWork struct {
	// Group is the group's name.
	Group string
	// Records is how many result records of the group were read.
	Records int64
	// Done is the time the tasks' attempts ran (start to end of each
	// attempt whose times are known).
	Done time.Duration
	// Lost is the work of stopped attempts (preempted, stopped, past their
	// time limit) that no checkpoint kept.
	Lost time.Duration
	// Saved is the work of stopped attempts that their checkpoints kept
	// for the next attempt.
	Saved time.Duration
	// Preemptions counts the attempts stopped by a preemption notice.
	Preemptions int64
}

// add counts the attempts of r.
func (w *GroupWork) add(r *Result) {
	w.Records++
	for _, a := range r.Attempts {
		if !a.Start.IsZero() && a.End.After(a.Start) {
			w.Done += a.End.Sub(a.Start)
		}
		w.Lost += a.Lost
		w.Saved += a.Saved
		if a.Outcome == OutcomePreempted {
			w.Preemptions++
		}
	}
}

// GroupWork adds up the work of the named groups' ended tasks from their
// result records, in one pass (ExportResults, from the first push of the
// oldest of them on), and returns one GroupWork per name, in order. It
// reads the queue's records written since then, so it costs what an
// export of them costs; nothing on the task path. Attempt histories keep
// the last 10 attempts of a task, so older ones of a task retried more
// often are not counted. It fails as Group and ExportResults do (NotFound
// for an unknown group, Unimplemented where records cannot be listed).
func (a *Admin) GroupWork(ctx context.Context, names ...string) ([]*GroupWork, error) {
	out := make([]*GroupWork, len(names))
	by := make(map[string]*GroupWork, len(names))
	var since time.Time
	for i, name := range names {
		c, err := a.Group(ctx, name)
		if err != nil {
			return nil, err
		}
		if since.IsZero() || c.Created.Before(since) {
			since = c.Created
		}
		out[i] = &GroupWork{Group: name}
		by[name] = out[i]
	}
	if len(names) == 0 {
		return out, nil
	}
	// A second's slack for the clocks of the producer and the engine.
	err := a.ExportResults(ctx, driver.ResultFilter{Since: since.Add(-time.Second)}, func(r *Result) error {
		if w := by[r.Group]; w != nil && r.Group != "" {
			w.add(r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
