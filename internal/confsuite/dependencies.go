package confsuite

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// dependencyChecks are the checks of held tasks at the portable level:
// dependencies (Task.After, Task.AfterGroups) and a group's step
// (Admin.ThenGroup), decided by Admin.SweepHeld.
func dependencyChecks() []check {
	return []check{
		{"DependencyHeldUntilParentSucceeds", checkDependencyHeld},
		{"DependencyCancelledWithParent", checkDependencyCancelled},
		{"DependencyDiamond", checkDependencyDiamond},
		{"DependencyFanOutFanIn", checkDependencyFan},
		{"DependencyRefusals", checkDependencyRefusals},
		{"GroupStepOnce", checkGroupStepOnce},
		{"GroupStepAfterSettlerDies", checkGroupStepSettlerDies},
	}
}

// needDeps skips a check on a backend that cannot hold tasks, after
// checking that a dependency, a group's step and a sweep are refused
// there (Unimplemented) rather than ignored.
func (c *C) needDeps(q *handle) {
	c.Helper()
	if level(q, driver.Dependencies) != driver.Unsupported {
		if level(q, driver.Results) == driver.Unsupported {
			c.Errorf("dependencies are declared %s without results, which they read parents' ends from", level(q, driver.Dependencies))
		}
		return
	}
	_, err := q.Push(c.ctx(), &jobq.Task{Command: "echo after", After: []string{"parent"}})
	c.expectCode(err, errcode.Unimplemented, "a push with After on a backend without dependencies")
	_, err = q.Admin().ThenGroup(c.ctx(), "conformance", task("step"), driver.RequireEnded)
	c.expectCode(err, errcode.Unimplemented, "ThenGroup on a backend without dependencies")
	_, err = q.Admin().SweepHeld(c.ctx())
	c.expectCode(err, errcode.Unimplemented, "SweepHeld on a backend without dependencies")
	c.Skipf("dependencies are unsupported: %s", q.Capabilities().Features[driver.Dependencies].Fallback)
}

// sweep runs one SweepHeld, failing the check on error.
func (c *C) sweep(q *handle) jobq.SweepResult {
	c.Helper()
	res, err := q.Admin().SweepHeld(c.ctx())
	if err != nil {
		c.Fatalf("SweepHeld: %v", err)
	}
	return res
}

// runHeld runs the queue's tasks as workers would, sweeping whenever none
// is claimable, until n tasks completed, and returns their IDs in the
// order they completed.
func (c *C) runHeld(q *handle, n int) []string {
	c.Helper()
	var order []string
	vis := c.longVis(q)
	idle := time.Now()
	// An emulated sweep reads every held task and its parents' records
	// one request apiece (Azure): sweeping every 10 ms swamped Azurite.
	pause := 10 * time.Millisecond
	if level(q, driver.Dependencies) != driver.Native {
		pause = 500 * time.Millisecond
	}
	// Each received task is completed in turn: where the lease is short
	// (a Service Bus queue's lock duration caps it), a batch of 100 took
	// longer than the lease on a loaded machine, and so did ten under a
	// 5 s lock (each completion writes its record blob).
	batch := 100
	switch {
	case vis < 30*time.Second:
		batch = 1
	case vis < time.Minute:
		batch = 10
	}
	for len(order) < n {
		envs, err := q.ReceiveBatch(c.ctx(), batch, jobq.ReceiveOptions{Visibility: vis})
		if err != nil {
			c.Fatalf("receive: %v", err)
		}
		for _, e := range envs {
			if c.completeHeld(e) {
				order = append(order, e.Task.ID)
			}
		}
		if len(envs) > 0 {
			idle = time.Now()
			continue
		}
		if res := c.sweep(q); len(res.Released) > 0 {
			idle = time.Now()
			continue
		}
		if time.Since(idle) > c.patience() {
			c.Fatalf("%d of %d tasks ran; nothing is claimable and a sweep releases nothing", len(order), n)
		}
		time.Sleep(pause)
	}
	return order
}

// completeHeld completes e as renewHeld renews it: a completion that came
// back LockLost after the lease had run out returns false, logged (a
// Service Bus receiver keeps messages that arrived after a receive for the
// next one, their locks running meanwhile); the task is delivered again,
// and runHeld takes it then.
func (c *C) completeHeld(e *jobq.Envelope) bool {
	c.Helper()
	return c.whileHeld(e, "complete task "+e.Task.ID, func() error { return e.Complete(c.ctx()) })
}

// expectOrder checks that every task in order ran after the parents it
// names in after (by ID).
func (c *C) expectOrder(order []string, after map[string][]string) {
	c.Helper()
	at := make(map[string]int, len(order))
	for i, id := range order {
		if _, dup := at[id]; dup {
			c.Errorf("task %s ran twice", id)
		}
		at[id] = i
	}
	for id, parents := range after {
		for _, p := range parents {
			if at[p] >= at[id] {
				c.Errorf("task %s ran at %d, before (or with) its parent %s at %d", id, at[id], p, at[p])
				return
			}
		}
	}
}

// checkDependencyHeld: a task pushed after another is not claimable, and
// a sweep leaves it held, until its parent succeeded; then a sweep
// releases it, once; a held task can be cancelled by its ID.
func checkDependencyHeld(c *C) {
	q := c.open()
	c.needDeps(q)
	parent := c.push(q, task("parent"))[0]
	child := &jobq.Task{Command: "echo conformance child", After: []string{parent}}
	c.push(q, child)
	if child.After[0] != parent {
		c.Errorf("push changed Task.After to %v", child.After)
	}
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != parent {
		c.Fatalf("received %s; want the parent %s (the child is held)", e.Task.ID, parent)
	}
	if len(e.Task.After) > 0 {
		c.Errorf("a received task has After %v; want none", e.Task.After)
	}
	c.receiveNone(q, time.Time{}, "the child waits for its parent, which runs")
	if res := c.sweep(q); len(res.Released)+len(res.Cancelled) > 0 {
		c.Errorf("a sweep while the parent runs = %+v; want nothing released or cancelled", res)
	}
	c.complete(e)
	if res := c.sweep(q); !slices.Equal(res.Released, []string{child.ID}) {
		c.Fatalf("a sweep after the parent succeeded released %v; want the child %s", res.Released, child.ID)
	}
	if res := c.sweep(q); len(res.Released) > 0 {
		c.Errorf("a second sweep released %v again", res.Released)
	}
	got := c.receive(q, c.longVis(q))
	if got.Task.ID != child.ID || got.Task.Command != child.Command {
		c.Errorf("received %s %q; want the child %s", got.Task.ID, got.Task.Command, child.ID)
	}
	c.complete(got)

	// A held task cancelled by its ID is gone, recorded as cancelled.
	other := c.push(q, task("other parent"))[0]
	held := &jobq.Task{Command: "echo conformance cancelled while held", After: []string{other}}
	c.push(q, held)
	if level(q, driver.Cancel) == driver.Unsupported {
		return
	}
	res, err := q.Admin().Cancel(c.ctx(), held.ID)
	c.expectCancel(res, err, held.ID, jobq.CancelRemoved)
	if r := c.result(q, held.ID); r.State != driver.ResultCancelled {
		c.Errorf("the record of a held task cancelled is %s; want cancelled", r.State)
	}
	c.complete(c.receive(q, c.longVis(q)))
	if res := c.sweep(q); len(res.Released) > 0 {
		c.Errorf("a sweep released %v, a held task that was cancelled", res.Released)
	}
	c.receiveNone(q, time.Time{}, "the cancelled held task must never run")
}

// checkDependencyCancelled: a task after a parent that is dead-lettered
// (and one after a parent that is cancelled) is cancelled by the sweep,
// with a record whose reason names the parent, and never runs.
func checkDependencyCancelled(c *C) {
	q := c.open()
	c.needDeps(q)
	if level(q, driver.DeadLetter) == driver.Unsupported {
		c.Skipf("dead-letter is unsupported: a parent cannot be dead-lettered")
	}
	parent := c.push(q, task("parent that fails"))[0]
	child := &jobq.Task{Command: "echo conformance child of a failure", After: []string{parent}}
	c.push(q, child)
	grandchild := &jobq.Task{Command: "echo conformance grandchild", After: []string{child.ID}}
	c.push(q, grandchild)
	e := c.receive(q, c.longVis(q))
	if err := e.DeadLetter(c.ctx(), "conformance: the parent fails", ""); err != nil {
		c.Fatalf("dead-letter: %v", err)
	}
	res := c.sweep(q)
	if !slices.Equal(res.Cancelled, []string{child.ID}) {
		c.Fatalf("a sweep after the parent was dead-lettered cancelled %v; want the child %s", res.Cancelled, child.ID)
	}
	r := c.result(q, child.ID)
	if r.State != driver.ResultCancelled || !strings.Contains(r.Error, parent) {
		c.Errorf("the child's record: %s %q; want cancelled, naming the parent %s", r.State, r.Error, parent)
	}
	// The grandchild follows on the next sweep: its parent is cancelled.
	if res := c.sweep(q); !slices.Equal(res.Cancelled, []string{grandchild.ID}) {
		c.Errorf("the next sweep cancelled %v; want the grandchild %s", res.Cancelled, grandchild.ID)
	} else if r := c.result(q, grandchild.ID); !strings.Contains(r.Error, child.ID) {
		c.Errorf("the grandchild's record says %q; want it to name %s", r.Error, child.ID)
	}
	c.receiveNone(q, time.Time{}, "the dependants of a dead-lettered task never run")
}

// checkDependencyDiamond: A, then B and C after A, then D after B and C,
// pushed in one batch, run in that order.
func checkDependencyDiamond(c *C) {
	q := c.open()
	c.needDeps(q)
	a := task("diamond a")
	if _, err := q.PushBatch(c.ctx(), []*jobq.Task{a}, jobq.PushOptions{}); err != nil {
		c.Fatalf("push a: %v", err)
	}
	b := &jobq.Task{Command: "echo conformance diamond b", After: []string{a.ID}}
	cc := &jobq.Task{Command: "echo conformance diamond c", After: []string{a.ID}}
	ts := []*jobq.Task{b, cc}
	if _, err := q.PushBatch(c.ctx(), ts, jobq.PushOptions{}); err != nil {
		c.Fatalf("push b and c: %v", err)
	}
	d := &jobq.Task{Command: "echo conformance diamond d", After: []string{b.ID, cc.ID}}
	if _, err := q.PushBatch(c.ctx(), []*jobq.Task{d}, jobq.PushOptions{}); err != nil {
		c.Fatalf("push d: %v", err)
	}
	order := c.runHeld(q, 4)
	c.expectOrder(order, map[string][]string{b.ID: {a.ID}, cc.ID: {a.ID}, d.ID: {b.ID, cc.ID}})
	if order[3] != d.ID {
		c.Errorf("ran %v; want d (%s) last", order, d.ID)
	}
}

// checkDependencyFan: one task, 1,000 after it and one after those
// 1,000, pushed in one batch: every one of the 1,000 runs after the
// first, and the last after all of them.
func checkDependencyFan(c *C) {
	q := c.open()
	c.needDeps(q)
	width := 1000
	if n := c.h.BulkTasks; n > 0 && n < width {
		// An emulator that settles slowly (Harness.BulkTasks).
		width = n
		c.Logf("the harness lowers the fan from %d tasks to %d (BulkTasks)", 1000, n)
	}
	root := &jobq.Task{ID: "fan-root", Command: "echo conformance fan root"}
	ts := []*jobq.Task{root}
	mids := make([]string, width)
	after := map[string][]string{}
	for i := range width {
		t := &jobq.Task{ID: fmt.Sprintf("fan-%04d", i), Command: fmt.Sprintf("echo conformance fan %d", i), After: []string{root.ID}}
		mids[i] = t.ID
		after[t.ID] = t.After
		ts = append(ts, t)
	}
	sink := &jobq.Task{ID: "fan-sink", Command: "echo conformance fan sink", After: mids}
	after[sink.ID] = mids
	ts = append(ts, sink)
	res, err := q.PushBatch(c.ctx(), ts, jobq.PushOptions{})
	if err != nil || len(res) != len(ts) {
		c.Fatalf("push the fan (%d tasks in one batch): %d results, %v", len(ts), len(res), err)
	}
	order := c.runHeld(q, len(ts))
	c.expectOrder(order, after)
	if order[0] != root.ID || order[len(order)-1] != sink.ID {
		c.Errorf("ran %s first and %s last; want %s and %s", order[0], order[len(order)-1], root.ID, sink.ID)
	}
}

// checkDependencyRefusals: a cycle in a batch, a task after itself, an
// unknown parent ID, an unknown group and a parent dead-lettered already
// are refused at the push, naming the offending ID, and store nothing.
// (Where dependencies are emulated, an unknown parent ID is taken as
// queued: the task is held, and cancelled by the check.)
func checkDependencyRefusals(c *C) {
	q := c.open()
	c.needDeps(q)
	x := &jobq.Task{ID: "cycle-x", Command: "echo conformance x", After: []string{"cycle-y"}}
	y := &jobq.Task{ID: "cycle-y", Command: "echo conformance y", After: []string{"cycle-x"}}
	_, err := q.PushBatch(c.ctx(), []*jobq.Task{task("before the cycle"), x, y}, jobq.PushOptions{})
	c.expectNamed(err, errcode.InvalidArgument, "cycle-", "a batch with a cycle")
	self := &jobq.Task{ID: "self", Command: "echo conformance self", After: []string{"self"}}
	_, err = q.Push(c.ctx(), self)
	c.expectNamed(err, errcode.InvalidArgument, "self", "a task after itself")
	orphan := &jobq.Task{Command: "echo conformance orphan", After: []string{"no-such-task-7f3a"}}
	_, err = q.Push(c.ctx(), orphan)
	if level(q, driver.Dependencies) == driver.Native {
		c.expectNamed(err, errcode.InvalidArgument, "no-such-task-7f3a", "a task after an unknown ID")
	} else {
		// Emulated (Azure): a queued task cannot be looked up by ID, so a
		// parent with no record and no held task is taken as queued, as
		// the fallback says; the orphan is held, and cancelled here.
		if err != nil {
			c.Fatalf("a task after an unknown ID, dependencies emulated (the parent is taken as queued): %v; want it held", err)
		}
		if level(q, driver.Cancel) == driver.Unsupported {
			c.Skipf("the orphan is held for ever: cancel is unsupported")
		}
		res, err := q.Admin().Cancel(c.ctx(), orphan.ID)
		c.expectCancel(res, err, orphan.ID, jobq.CancelRemoved)
	}
	_, err = q.Push(c.ctx(), &jobq.Task{Command: "echo conformance orphan", AfterGroups: []string{"no-such-group-7f3a"}})
	c.expectNamed(err, errcode.NotFound, "no-such-group-7f3a", "a task after an unknown group")
	if st, err := q.Admin().Stats(c.ctx()); err == nil && st.Ready+st.Delayed > 0 {
		c.Errorf("refused pushes stored %d ready and %d delayed tasks; want none", st.Ready, st.Delayed)
	}
	if res := c.sweep(q); len(res.Released)+len(res.Cancelled) > 0 {
		c.Errorf("refused pushes held tasks: a sweep did %+v", res)
	}
	if level(q, driver.DeadLetter) == driver.Unsupported {
		return
	}
	dead := c.push(q, task("dead parent"))[0]
	if err := c.receive(q, c.longVis(q)).DeadLetter(c.ctx(), "conformance", ""); err != nil {
		c.Fatalf("dead-letter: %v", err)
	}
	_, err = q.Push(c.ctx(), &jobq.Task{Command: "echo conformance after the dead", After: []string{dead}})
	c.expectNamed(err, errcode.FailedPrecondition, dead, "a task after a dead-lettered task")
}

// expectNamed checks err's code and that its text names name.
func (c *C) expectNamed(err error, want errcode.Code, name, what string) {
	c.Helper()
	c.expectCode(err, want, what)
	if err != nil && !strings.Contains(err.Error(), name) {
		c.Errorf("%s: error %q does not name %s", what, err, name)
	}
}

// stepGroup pushes n tasks in a fresh group, and the group's step with
// require; it returns the group and the step's ID.
func (c *C) stepGroup(q *handle, n int, require driver.HeldRequire) (string, string) {
	c.Helper()
	g := fmt.Sprintf("conformance-step-%d", time.Now().UnixNano())
	ts := make([]*jobq.Task, n)
	for i := range ts {
		ts[i] = &jobq.Task{Command: fmt.Sprintf("echo conformance step member %d %s", i, g), Group: g}
	}
	if _, err := q.PushBatch(c.ctx(), ts, jobq.PushOptions{}); err != nil {
		c.Fatalf("push the group: %v", err)
	}
	res, err := q.Admin().ThenGroup(c.ctx(), g, &jobq.Task{Command: `echo "$JOBQ_GROUP $JOBQ_GROUP_SUCCEEDED"`}, require)
	if err != nil {
		c.Fatalf("ThenGroup: %v", err)
	}
	if res.ID != jobq.ThenTaskID(g) {
		c.Errorf("ThenGroup's ID = %s; want ThenTaskID = %s", res.ID, jobq.ThenTaskID(g))
	}
	_, err = q.Admin().ThenGroup(c.ctx(), g, &jobq.Task{Command: "echo another step"}, require)
	c.expectCode(err, errcode.AlreadyExists, "a second step for a group")
	if st, err := q.Admin().GroupStep(c.ctx(), g); err != nil || st == nil || st.State != "held" || st.ID != res.ID {
		c.Errorf("GroupStep while the group runs = %+v, %v; want held %s", st, err, res.ID)
	}
	return g, res.ID
}

// expectStepEnv checks the environment the step e was received with.
func (c *C) expectStepEnv(e *jobq.Envelope, g string, want map[string]int64) {
	c.Helper()
	env := e.Task.EnvMap()
	if env[jobq.GroupEnvVar] != g {
		c.Errorf("the step's %s = %q; want %q", jobq.GroupEnvVar, env[jobq.GroupEnvVar], g)
	}
	for k, v := range want {
		if env[k] != fmt.Sprint(v) {
			c.Errorf("the step's %s = %q; want %d (env %v)", k, env[k], v, env)
		}
	}
}

// checkGroupStepOnce: a group's step, with 8 workers (each its own queue
// handle) racing the last settlements and each sweeping after every
// settlement, is released once and queued once, with the group's final
// counts in its environment; a step that needs every task to succeed is
// cancelled, naming the group, when one was dead-lettered.
func checkGroupStepOnce(c *C) {
	q := c.open()
	c.needDeps(q)
	if level(q, driver.Groups) == driver.Unsupported {
		c.Skipf("groups are unsupported: a group's step needs groups")
	}
	const n, workers = 64, 8
	g, step := c.stepGroup(q, n, driver.RequireEnded)
	hs := make([]*handle, workers)
	for i := range hs {
		hs[i] = c.openQueue(q.ref)
	}
	race := &stepRace{n: n, ended: map[string]bool{}, progress: time.Now()}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for _, w := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.raceWorker(w, g, step, race)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			c.Fatalf("a racing worker: %v", err)
		}
	}
	if race.released != 1 {
		c.Fatalf("the step was released %d times by 8 racing sweepers; want exactly once", race.released)
	}
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != step {
		c.Fatalf("received %s; want the step %s", e.Task.ID, step)
	}
	c.expectStepEnv(e, g, map[string]int64{"JOBQ_GROUP_PUSHED": n, "JOBQ_GROUP_SUCCEEDED": n, "JOBQ_GROUP_DEAD_LETTERED": 0, "JOBQ_GROUP_CANCELLED": 0})
	c.complete(e)
	c.receiveNone(q, time.Time{}, "the step runs once")
	if st, err := q.Admin().GroupStep(c.ctx(), g); err != nil || st == nil || st.State != string(driver.ResultSucceeded) {
		c.Errorf("GroupStep after the step ran = %+v, %v; want succeeded", st, err)
	}
	_, err := q.Admin().ThenGroup(c.ctx(), g, task("step again"), driver.RequireEnded)
	c.expectCode(err, errcode.AlreadyExists, "a step for a group whose step ran")

	if level(q, driver.DeadLetter) == driver.Unsupported {
		return
	}
	g2, step2 := c.stepGroup(q, 2, driver.RequireSucceeded)
	c.complete(c.receive(q, c.longVis(q)))
	if err := c.receive(q, c.longVis(q)).DeadLetter(c.ctx(), "conformance", ""); err != nil {
		c.Fatalf("dead-letter: %v", err)
	}
	if res := c.sweep(q); !slices.Equal(res.Cancelled, []string{step2}) {
		c.Fatalf("a sweep after a group with a dead letter ended cancelled %v; want its all-succeeded step %s", res.Cancelled, step2)
	}
	if r := c.result(q, step2); r.State != driver.ResultCancelled || !strings.Contains(r.Error, g2) {
		c.Errorf("the cancelled step's record: %s %q; want cancelled, naming group %s", r.State, r.Error, g2)
	}
	// A cancelled step may be replaced: one that runs whatever the ends.
	if _, err := q.Admin().ThenGroup(c.ctx(), g2, task("replacing step"), driver.RequireEnded); err != nil {
		c.Fatalf("ThenGroup replacing a cancelled step: %v", err)
	}
	if res := c.sweep(q); !slices.Equal(res.Released, []string{step2}) {
		c.Fatalf("a sweep of the replacing step of a group that ended released %v; want %s", res.Released, step2)
	}
	replaced := c.receive(q, c.longVis(q))
	c.expectStepEnv(replaced, g2, map[string]int64{"JOBQ_GROUP_SUCCEEDED": 1, "JOBQ_GROUP_DEAD_LETTERED": 1})
	c.complete(replaced)
}

// stepRace is what checkGroupStepOnce's racing workers share.
type stepRace struct {
	n        int // the group's tasks
	mu       sync.Mutex
	released int             // step releases the sweeps made
	ended    map[string]bool // the group's tasks completed
	progress time.Time       // when the last of them was completed
}

// stalled says, with the progress so far, why the race has made none for
// limit: no task completed, or, once all were, no sweep released the step.
func (r *stepRace) stalled(limit time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.progress) <= limit {
		return nil
	}
	if len(r.ended) < r.n {
		return fmt.Errorf("no task of the group was completed for %v (%d of %d were), and the step is still held", limit, len(r.ended), r.n)
	}
	return fmt.Errorf("the step was not released within %v of the group's last task ending (all %d were completed)", limit, r.n)
}

// raceWorker receives and completes the group's tasks on w, sweeping
// after each settlement, until the step is out of its hold (released by
// it or another); it adds to r.released the step releases its sweeps made.
// It fails when the race stalls: no task completed, or no release after
// the last, for six patiences. (Each worker sweeps after each of its 8 or
// more settlements; an emulated sweep of eight racing workers, blob
// listings and reads, took 0.3-1.1 s on Azurite, about 27 s for the whole
// check on a quiet machine and past a minute on a loaded one: the limit
// counts from the last progress, not from the start.)
func (c *C) raceWorker(w *handle, g, step string, r *stepRace) error {
	vis := c.longVis(w)
	limit := 6 * c.patience()
	for {
		if err := r.stalled(limit); err != nil {
			return err
		}
		e, err := w.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: vis})
		switch {
		case errors.Is(err, jobq.ErrEmpty):
		case err != nil:
			return err
		case e.Task.ID == step:
			// The step is for the check to receive: put it back. A lease
			// lost meanwhile (a slow host outlasting a short lock) puts it
			// back too, when the lock ends.
			if err := e.Requeue(c.ctx(), 0); err != nil && errcode.Of(err) != errcode.LockLost {
				return err
			}
		default:
			err := e.Complete(c.ctx())
			if errcode.Of(err) == errcode.LockLost {
				break // the task comes back, and a worker completes it then
			}
			if err != nil {
				return err
			}
			r.mu.Lock()
			if !r.ended[e.Task.ID] {
				r.ended[e.Task.ID] = true
				r.progress = time.Now()
			}
			r.mu.Unlock()
		}
		res, err := w.Admin().SweepHeld(c.ctx())
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.released += len(res.Released)
		r.mu.Unlock()
		st, err := w.Admin().GroupStep(c.ctx(), g)
		if err != nil {
			return err
		}
		if st == nil || st.State != "held" {
			return nil
		}
	}
}

// checkGroupStepSettlerDies: the worker that settles a group's last task
// dies before it sweeps (its queue handle is closed right after the
// settlement, as a SIGKILL would stop it); the step waits, held, and
// another worker's sweep releases it.
func checkGroupStepSettlerDies(c *C) {
	q := c.open()
	c.needDeps(q)
	if level(q, driver.Groups) == driver.Unsupported {
		c.Skipf("groups are unsupported: a group's step needs groups")
	}
	g, step := c.stepGroup(q, 3, driver.RequireSucceeded)
	dying := c.openQueue(q.ref)
	for range 3 {
		c.complete(c.receive(dying, c.longVis(q)))
	}
	if err := dying.Close(); err != nil {
		c.Fatalf("close the dying worker's queue: %v", err)
	}
	if st, err := q.Admin().GroupStep(c.ctx(), g); err != nil || st == nil || st.State != "held" {
		c.Fatalf("GroupStep after the last settlement, before any sweep = %+v, %v; want held", st, err)
	}
	c.receiveNone(q, time.Time{}, "the step is held until a sweep")
	if res := c.sweep(q); !slices.Equal(res.Released, []string{step}) {
		c.Fatalf("another worker's sweep released %v; want the step %s", res.Released, step)
	}
	e := c.receive(q, c.longVis(q))
	c.expectStepEnv(e, g, map[string]int64{"JOBQ_GROUP_PUSHED": 3, "JOBQ_GROUP_SUCCEEDED": 3})
	c.complete(e)
}
