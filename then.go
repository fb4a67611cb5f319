package jobq

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// GroupEnvVar is the variable a group's step carries in its environment:
// the group's name. When a worker starts the step it adds the group's
// final counts: JOBQ_GROUP_PUSHED, JOBQ_GROUP_SUCCEEDED,
// JOBQ_GROUP_FAILED (failed attempts that were retried),
// JOBQ_GROUP_DEAD_LETTERED and JOBQ_GROUP_CANCELLED.
const GroupEnvVar = "JOBQ_GROUP"

// thenPrefix starts the ID of every group's step.
const thenPrefix = "then-"

// ThenTaskID is the ID of group's step (Admin.ThenGroup): the same for
// every push of a step for that group, so that a group has one step.
func ThenTaskID(group string) string {
	sum := md5.Sum([]byte("jobq group step\x00" + group))
	return thenPrefix + hex.EncodeToString(sum[:])
}

// ThenGroup holds t, the group's step, until every task of group has
// ended, and then queues it once, whatever the number of workers: when
// every task succeeded (require driver.RequireSucceeded), or whatever
// their ends (driver.RequireEnded). A step whose condition is not met is
// cancelled, its record saying why. The step's ID is ThenTaskID(group);
// a shell step gets GroupEnvVar and, when it starts, the group's final
// counts in its environment. The group must exist (push its tasks
// first); a second step for it is refused (AlreadyExists) while the
// first is held, or once it has run; a step cancelled (Admin.Cancel of
// its ID, or by its condition) may be replaced. t must not be in group
// itself.
func (a *Admin) ThenGroup(ctx context.Context, group string, t *Task, require driver.HeldRequire) (PushResult, error) {
	const op = "then"
	q := a.q
	if err := checkStep(op, group, t, require); err != nil {
		return PushResult{}, err
	}
	id := ThenTaskID(group)
	if _, _, err := q.heldStore(ctx, op); err != nil {
		return PushResult{}, err
	}
	if _, err := a.Group(ctx, group); err != nil {
		return PushResult{}, err
	}
	recs, err := q.getResults(ctx, op, q.results, []string{id})
	if err != nil {
		return PushResult{}, err
	}
	if r := recs[0]; r != nil && (r.State == driver.ResultSucceeded || r.State == driver.ResultDeadLettered) {
		// A cancelled step may be replaced; one that ran may not.
		return PushResult{}, &Error{Code: errcode.AlreadyExists, Op: op, Queue: q.url,
			Msg: fmt.Sprintf("group %q has had its step already (task %s, %s); push the step as an ordinary task, or the sweep again in a new group", group, id, r.State)}
	}
	step := *t
	step.ID = id
	step.AfterGroups = []string{group}
	if step.IsShell() && len(step.Payload) == 0 {
		step.Env = append(slices.Clip(step.Env), EnvVar{Name: GroupEnvVar, Value: group})
	}
	res, err := q.pushDeps(ctx, []*Task{&step}, PushOptions{}, require)
	if err != nil {
		var be *BatchError
		if errors.As(err, &be) && len(be.Errs) == 1 {
			err = be.Errs[0]
		}
		return PushResult{}, err
	}
	if res[0].Duplicate {
		return res[0], &Error{Code: errcode.AlreadyExists, Op: op, Queue: q.url,
			Msg: fmt.Sprintf("group %q has a step already (task %s); cancel it (`jobq QUEUE cancel %s`) to replace it", group, id, id)}
	}
	return res[0], nil
}

// checkStep refuses a step ThenGroup cannot hold.
func checkStep(op, group string, t *Task, require driver.HeldRequire) error {
	if err := validGroupName(op, group); err != nil {
		return err
	}
	switch {
	case require != driver.RequireSucceeded && require != driver.RequireEnded:
		return errorf(errcode.InvalidArgument, op, "step condition %q: use all-succeeded (\"\") or always", require)
	case t == nil:
		return errorf(errcode.InvalidArgument, op, "the step's task is nil")
	case t.ID != "" && t.ID != ThenTaskID(group):
		return errorf(errcode.InvalidArgument, op, "a group's step has the ID ThenTaskID(%q) = %s; leave Task.ID empty", group, ThenTaskID(group))
	case len(t.After) > 0 || len(t.AfterGroups) > 0:
		return errorf(errcode.InvalidArgument, op, "a group's step waits for its group only: leave After and AfterGroups empty")
	}
	return nil
}

// GroupStep is where a group's step is.
type GroupStep struct {
	// ID is the step's task ID (ThenTaskID).
	ID string
	// State is "held" (waiting for the group's end), "queued" (released,
	// not ended yet) or the state of its result record.
	State string
	// Require is the step's condition while it is held.
	Require driver.HeldRequire
}

// GroupStep returns where group's step is, nil when it has none (or its
// record expired).
func (a *Admin) GroupStep(ctx context.Context, group string) (*GroupStep, error) {
	const op = "group"
	q := a.q
	if err := q.checkOpen(op); err != nil {
		return nil, err
	}
	if _, ok := q.drv.(driver.HeldStore); !ok || q.caps.Level(driver.Dependencies) == driver.Unsupported || q.results == nil {
		return nil, nil
	}
	id := ThenTaskID(group)
	held, err := q.heldTask(ctx, op, id)
	if err != nil {
		return nil, err
	}
	if held != nil {
		return &GroupStep{ID: id, State: "held", Require: held.Require}, nil
	}
	recs, err := q.getResults(ctx, op, q.results, []string{id})
	if err != nil {
		return nil, err
	}
	if r := recs[0]; r != nil {
		return &GroupStep{ID: id, State: string(r.State)}, nil
	}
	if f, ok := q.drv.(driver.TaskFinder); ok {
		live, err := f.FindTasks(ctx, []string{id})
		if err != nil {
			return nil, q.wrap(op, err)
		}
		if len(live) > 0 {
			return &GroupStep{ID: id, State: "queued"}, nil
		}
	}
	return nil, nil
}

// withGroupEnv returns task, received, with its group's final counts
// added to its environment when it is a group's step: a shell task whose
// ID is ThenTaskID of the group its GroupEnvVar names. Any other task is
// returned as it is, after a string comparison.
func (q *Queue) withGroupEnv(ctx context.Context, task *Task) *Task {
	if !strings.HasPrefix(task.ID, thenPrefix) || q.groups == nil || !task.IsShell() {
		return task
	}
	group := ""
	for _, e := range task.Env {
		if e.Name == GroupEnvVar {
			group = e.Value
		}
	}
	if group == "" || ThenTaskID(group) != task.ID {
		return task
	}
	c, err := q.groups.GroupCounts(ctx, group)
	if err != nil || c == nil {
		q.log.Warn("jobq: could not read the counts of a group for its step; it runs without them", "group", group, "task_id", task.ID, "error", err)
		return task
	}
	out := *task
	out.Env = append(slices.Clip(task.Env),
		EnvVar{Name: "JOBQ_GROUP_PUSHED", Value: strconv.FormatInt(c.Pushed, 10)},
		EnvVar{Name: "JOBQ_GROUP_SUCCEEDED", Value: strconv.FormatInt(c.Succeeded, 10)},
		EnvVar{Name: "JOBQ_GROUP_FAILED", Value: strconv.FormatInt(c.Failed, 10)},
		EnvVar{Name: "JOBQ_GROUP_DEAD_LETTERED", Value: strconv.FormatInt(c.DeadLettered, 10)},
		EnvVar{Name: "JOBQ_GROUP_CANCELLED", Value: strconv.FormatInt(c.Cancelled, 10)},
	)
	return &out
}
