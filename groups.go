package jobq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// checkGroup refuses a group name no backend can keep, and a group on a
// backend without the groups feature (a group that is not counted would
// leave its followers waiting forever).
func (q *Queue) checkGroup(op, group string) error {
	if err := validGroupName(op, group); err != nil {
		return err
	}
	if q.groups == nil {
		return q.unsupported(op, driver.Groups, "cannot count tasks by group")
	}
	return q.degrade(op, driver.Groups)
}

// validGroupName checks a group's name: UTF-8 text without NUL or control
// characters, at most driver.MaxGroupBytes bytes.
func validGroupName(op, group string) error {
	if err := checkTextField("group", group); err != nil {
		return err
	}
	switch {
	case len(group) > driver.MaxGroupBytes:
		return errorf(errcode.InvalidArgument, op, "group name is %d bytes; the limit is %d", len(group), driver.MaxGroupBytes)
	case strings.IndexFunc(group, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return errorf(errcode.InvalidArgument, op, "group name %q holds a control character; use letters, digits and punctuation", group)
	}
	return nil
}

// tallyOf is the group tally of a settlement that adds one to st of group
// (zero when the task has no group).
func tallyOf(group string, st driver.GroupState) driver.GroupTally {
	if group == "" {
		return driver.GroupTally{}
	}
	return driver.GroupTally{Group: group, State: st}
}

// tally is tallyOf the envelope's task.
func (e *Envelope) tally(st driver.GroupState) driver.GroupTally { return tallyOf(e.group, st) }

// groupStore returns the driver's group store, or an Unimplemented error
// naming op.
func (q *Queue) groupStore(op string) (driver.GroupStore, error) {
	if err := q.checkOpen(op); err != nil {
		return nil, err
	}
	if q.groups == nil {
		return nil, q.unsupported(op, driver.Groups, "cannot count tasks by group")
	}
	return q.groups, nil
}

// Group returns the counts of the tasks pushed with Task.Group name: how
// many were pushed, how many ended and how (succeeded, dead-lettered,
// cancelled), how many attempts failed and were retried, and, where the
// backend can tell (Split), where the open ones are now. The counts are
// exact on backends whose groups feature is native. It fails with
// NotFound when the queue has no such group.
func (a *Admin) Group(ctx context.Context, name string) (*driver.GroupCounters, error) {
	const op = "group"
	store, err := a.q.groupStore(op)
	if err != nil {
		return nil, err
	}
	if err := validGroupName(op, name); err != nil {
		return nil, err
	}
	c, err := store.GroupCounts(ctx, name)
	if err != nil {
		return nil, a.q.wrap(op, err)
	}
	if c == nil {
		return nil, &Error{Code: errcode.NotFound, Op: op, Queue: a.q.url,
			Msg: fmt.Sprintf("no group %q in this queue (list them with `jobq QUEUE groups`)", name)}
	}
	return c, nil
}

// Groups returns up to limit groups (all when limit <= 0 is not allowed:
// 1 and up), most recently changed first.
func (a *Admin) Groups(ctx context.Context, limit int) ([]*driver.GroupCounters, error) {
	const op = "groups"
	store, err := a.q.groupStore(op)
	if err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, errorf(errcode.InvalidArgument, op, "limit %d: list at least 1 group", limit)
	}
	gs, err := store.ListGroups(ctx, limit)
	if err != nil {
		return nil, a.q.wrap(op, err)
	}
	return gs, nil
}

// WaitGroup waits until every task of group name has ended, reading its
// counts every poll (a second when zero), or, where a reading takes long
// (backends that count a group's open tasks by state), waitReadShare times
// as long as the last one took, and returns the final counts.
// each, when not nil, is called with every reading, the last one included;
// an error from it ends the wait. It fails as Group does, or with the
// context's error. Where records are emulated, it finds the group's tasks
// dead-lettered without a record as WaitFunc does, and records their ends.
func (a *Admin) WaitGroup(ctx context.Context, name string, poll time.Duration, each func(*driver.GroupCounters) error) (*driver.GroupCounters, error) {
	if poll <= 0 {
		poll = time.Second
	}
	dead := a.q.newDeadLook()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, a.q.wrap("group", ctx.Err())
		case <-t.C:
		}
		began := time.Now()
		c, err := a.Group(ctx, name)
		took := time.Since(began)
		if err != nil {
			return nil, err
		}
		if each != nil {
			if err := each(c); err != nil {
				return c, err
			}
		}
		if c.Done() {
			return c, nil
		}
		a.q.groupDeadEnded(ctx, name, dead)
		t.Reset(max(poll, waitReadShare*took))
	}
}
