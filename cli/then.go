package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// thenIfValues are --then-if's values, with the condition each stands for.
var thenIfValues = map[string]driver.HeldRequire{
	"all-succeeded": driver.RequireSucceeded,
	"always":        driver.RequireEnded,
}

// thenIf reads a --then-if value.
func thenIf(v string) (driver.HeldRequire, error) {
	r, ok := thenIfValues[v]
	if !ok {
		return "", usageError("--then-if %q: use all-succeeded (run the step only when every task of the group succeeded) or always", v)
	}
	return r, nil
}

// thenIfName is the --then-if value of r.
func thenIfName(r driver.HeldRequire) string {
	if r == driver.RequireEnded {
		return "always"
	}
	return "all-succeeded"
}

// pushThen holds cmd as group's step (push --then, group NAME then) and
// says so.
func (a *app) pushThen(ctx context.Context, q *jobq.Queue, group, cmd string, require driver.HeldRequire, env []jobq.EnvVar, cwd string) error {
	res, err := q.Admin().ThenGroup(ctx, group, &jobq.Task{Command: cmd, Env: env, Cwd: cwd}, require)
	if err != nil {
		switch errcode.Of(err) {
		case errcode.InvalidArgument, errcode.Unimplemented, errcode.NotFound, errcode.AlreadyExists, errcode.FailedPrecondition:
			return asUsage(err)
		}
		return failure(err)
	}
	when := "when every task of the group has ended, if all succeeded (else it is cancelled)"
	if require == driver.RequireEnded {
		when = "when every task of the group has ended, whatever their outcome"
	}
	a.log.Info("group step held", "group", group, "task_id", res.ID, "then_if", thenIfName(require))
	fmt.Fprintf(a.stderr, "jobq: step of group %s held as task %s: it runs %s, with the group's counts in $JOBQ_GROUP_*; follow it with: %s\n",
		group, res.ID, when, a.commandHint("group "+group))
	return nil
}

// afterIDs is the task IDs of an --after value, comma-separated (an empty
// one included: checkAfterValues refuses it).
func afterIDs(v string) []string {
	ids := strings.Split(v, ",")
	for i := range ids {
		ids[i] = strings.TrimSpace(ids[i])
	}
	return ids
}

// applyAfter adds --after and --after-group to t's own dependencies.
func (f *pushFlags) applyAfter(t *jobq.Task) {
	for _, v := range f.after {
		for _, id := range afterIDs(v) {
			if id != "" && !slices.Contains(t.After, id) {
				t.After = append(t.After, id)
			}
		}
	}
	for _, g := range f.afterGroups {
		if !slices.Contains(t.AfterGroups, g) {
			t.AfterGroups = append(t.AfterGroups, g)
		}
	}
}

// checkDepFlags refuses --after, --after-group and --then where they
// cannot work, before anything is pushed, and returns --then-if's
// condition.
func checkDepFlags(q *jobq.Queue, f pushFlags, group string) (driver.HeldRequire, error) {
	require, err := thenIf(f.thenIf)
	if err != nil {
		return "", err
	}
	deps := len(f.after) > 0 || len(f.afterGroups) > 0
	switch {
	case f.thenIf != "all-succeeded" && f.then == "":
		return "", usageError("--then-if says when --then runs; give --then with it")
	case !deps && f.then == "":
		return require, nil
	case q.Capabilities().Level(driver.Dependencies) == driver.Unsupported:
		what := "--then"
		if deps {
			what = "--after and --after-group"
		}
		msg := what + ": this backend cannot hold a task until others end"
		if fb := q.Capabilities().Features[driver.Dependencies].Fallback; fb != "" {
			msg += " (" + fb + ")"
		}
		return "", usageError("%s; see 'jobq backends' (dependencies) for the backends that can", msg)
	case deps && (f.skipSucc || f.uniqueFor > 0):
		return "", usageError("--after and --after-group cannot be combined with --skip-succeeded or --unique-for: push the tasks with dependencies apart")
	case f.then != "" && group == "":
		return "", usageError("--then runs when the push's group ends, and this backend counts no groups")
	}
	return require, nil
}

// checkNoStep refuses push --then before anything is pushed when group
// has a step that cannot be replaced (held, queued or run): the push would
// store its tasks and then fail to hold the step. A cancelled step may be
// replaced. A step held by another push in between is still refused
// after the push, by ThenGroup.
func (a *app) checkNoStep(ctx context.Context, q *jobq.Queue, f pushFlags, group string) error {
	if f.then == "" {
		return nil
	}
	step, err := q.Admin().GroupStep(ctx, group)
	if err != nil || step == nil {
		return err
	}
	switch driver.ResultState(step.State) {
	case driver.ResultCancelled, driver.ResultCancelRequested:
		return nil
	}
	return usageError("--then: group %s has a step already (task %s, %s); nothing was pushed. Push without --then to add tasks to the group, or cancel the step first (%s) to replace it",
		group, step.ID, step.State, a.commandHint("cancel "+step.ID))
}

// hasAfter reports whether a task of ts has dependencies.
func hasAfter(ts []*jobq.Task) bool {
	for _, t := range ts {
		if len(t.After) > 0 || len(t.AfterGroups) > 0 {
			return true
		}
	}
	return false
}
