package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/endreason"
)

// dispatcher runs a worker's receivers: Options.Receivers loops that each
// take free slots from one shared pool, receive up to that many tasks and
// start them. Several receives in flight overlap their round trips with
// each other and with the settlement of earlier tasks, which is what bounds
// a single receive loop when handlers are fast.
type dispatcher struct {
	w        *Worker
	slots    chan struct{} // one token per free task slot
	ahead    chan struct{} // one token per task that may be prefetched; nil without prefetch
	handlers *handlerQueue // a task holds a handler while it runs
	share    int           // the most tokens one receive asks for
	// unsettled holds the tasks whose handler returned and whose
	// settlement has not, and that gave their token back early
	// (backlog.go).
	unsettled *backlog
	recvCtx   context.Context
	cancel    context.CancelFunc
	tasks     sync.WaitGroup // the tasks started, running or settling
	runners   *runners       // the goroutines they run on

	quitOnce sync.Once
	quit     chan struct{} // closed when the dispatcher ends itself
	err      error         // why, when it is an error; read after the receivers end

	// Guarded by w.mu, together with w.running.
	receiving int    // receives in flight, including one whose tasks are not yet counted as running
	begun     uint64 // receives begun, so that an exit check notices one that began meanwhile
	taken     int    // tasks received, for MaxTasks
	reserved  int    // tasks asked for by the receives in flight, for MaxTasks
	ended     bool   // no receive may begin
	// wake is closed, and replaced, when a receive brings tasks: receivers
	// parked after an empty receive, or waiting for MaxTasks budget, resume.
	wake chan struct{}
	// full is closed, and replaced, when a receive brings more than one
	// task, or all it asked for: receivers parked after an empty receive
	// resume. One that brings a single task of several asked for found the
	// queue drained (tasks trickle in), and the receiver that made it goes
	// on polling alone. (Cloud queues return partial batches from a
	// backlog, so a partial one of several tasks resumes them.)
	full chan struct{}
	// ended1 is closed, and replaced, when a receive ends: a receiver
	// gathering slots stops waiting for more.
	ended1 chan struct{}
	// idle is closed, and replaced, when the last running task ends: a
	// receiver waiting for the worker to fall idle looks again.
	idle chan struct{}
	bo   *backoff.ExponentialBackOff // between failed receives, shared
	// pollWait is how long the next receive of a Wait worker waits on an
	// empty queue: Options.Poll, doubled by every empty receive up to
	// Options.MaxPoll, back to Poll when a receive brings tasks.
	pollWait time.Duration
	// refusedBo paces receives refused for want of resources (a full
	// disk), which are retried for as long as that lasts.
	refusedBo *backoff.ExponentialBackOff
}

func newDispatcher(w *Worker) *dispatcher {
	ctx, cancel := context.WithCancel(context.Background())
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 30 * time.Second
	bo.MaxElapsedTime = w.receiveGiveUp
	refusedBo := backoff.NewExponentialBackOff()
	refusedBo.InitialInterval = bo.InitialInterval
	refusedBo.MaxInterval = bo.MaxInterval
	refusedBo.MaxElapsedTime = 0
	d := &dispatcher{
		w:         w,
		slots:     make(chan struct{}, w.o.Concurrency),
		handlers:  newHandlerQueue(w.o.Concurrency),
		unsettled: newBacklog(maxUnsettled),
		share:     (w.o.Concurrency + w.o.Prefetch + w.o.Receivers - 1) / w.o.Receivers,
		recvCtx:   ctx,
		cancel:    cancel,
		quit:      make(chan struct{}),
		wake:      make(chan struct{}),
		full:      make(chan struct{}),
		ended1:    make(chan struct{}),
		idle:      make(chan struct{}),
		bo:        bo,
		refusedBo: refusedBo,
		pollWait:  w.o.Poll,
	}
	d.runners = newRunners(&d.tasks)
	if w.q != nil {
		d.unsettled.limit = unsettledLimit(w.q.Capabilities())
	}
	for range w.o.Concurrency {
		d.slots <- struct{}{}
	}
	if w.o.Prefetch > 0 {
		d.ahead = make(chan struct{}, w.o.Prefetch)
		for range w.o.Prefetch {
			d.ahead <- struct{}{}
		}
	}
	return d
}

// dispatch runs the receivers until the worker drains or the dispatcher
// ends itself (queue empty, task limit, receive failure), then waits for
// the tasks they started.
func (w *Worker) dispatch() error {
	d := newDispatcher(w)
	defer d.cancel()
	defer d.runners.close()
	// Receives are cancelled when the worker drains, so a long poll does
	// not delay shutdown.
	go func() {
		select {
		case <-w.drainCh:
			d.cancel()
		case <-d.recvCtx.Done():
		}
	}()
	var receivers sync.WaitGroup
	for range w.o.Receivers {
		receivers.Go(d.receive)
	}
	receivers.Wait()
	w.awaitTasks(&d.tasks)
	return d.err
}

// finish ends the dispatcher: no receive begins after it, and receives in
// flight are cancelled.
func (d *dispatcher) finish(reason string, err error) {
	d.quitOnce.Do(func() {
		d.w.end(reason)
		d.w.mu.Lock()
		d.ended = true
		d.w.mu.Unlock()
		d.err = err
		close(d.quit)
		d.cancel()
	})
}

// give returns n slots to the pool.
func (d *dispatcher) give(n int) {
	for range n {
		d.slots <- struct{}{}
	}
}

// stopping reports whether the worker drains or the dispatcher has ended;
// select picks at random among ready cases, so this makes them win over a
// free slot.
func (d *dispatcher) stopping() bool {
	select {
	case <-d.w.drainCh:
		return true
	case <-d.quit:
		return true
	default:
		return false
	}
}

// park waits until a receive brings tasks (ch closed) and reports whether
// the receiver should go on.
func (d *dispatcher) park(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-d.w.drainCh:
		return false
	case <-d.quit:
		return false
	}
}

// gather takes up to share tokens for a receive, having taken t. While
// another receive is in flight it waits for slots to come free, so that
// receives ask for full batches (a claim costs about the same for one task
// as for several); with none in flight it goes with what is free, so a
// freed slot is never left waiting. Prefetch tokens are taken only while
// handlers are fast. It returns false when the worker drains or the
// dispatcher ends meanwhile.
func (d *dispatcher) gather(t claimTokens) (claimTokens, bool) {
	w := d.w
	for t.total() < d.share {
		select {
		case <-d.slots:
			t.main++
			continue
		default:
		}
		ahead, turned := d.aheadPool()
		select {
		case <-ahead:
			t.ahead++
			continue
		default:
		}
		w.mu.Lock()
		busy := d.receiving > 0
		ch := d.ended1
		w.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-d.slots:
			t.main++
		case <-ahead:
			t.ahead++
		case <-turned:
		case <-ch:
		case <-w.drainCh:
			return t, false
		case <-d.quit:
			return t, false
		}
	}
	return t, true
}

// receive is one receiver's loop: take tokens, begin a receive, claim
// tasks, end the receive, then start the tasks, back off after a failure,
// or decide what an empty receive means.
func (d *dispatcher) receive() {
	for {
		t, ok := d.acquire()
		if !ok {
			return
		}
		c, next := d.begin(t)
		switch next {
		case stepEnd:
			return
		case stepRestart:
			continue
		}
		envs, err := d.claim(&c)
		a := d.end(c, len(envs), err)
		if err != nil {
			if !d.backOff(err, c.seen) {
				return
			}
			continue
		}
		d.start(envs, c.t)
		if a.limit && !d.awaitBudget() {
			return
		}
		if len(envs) == 0 && !d.afterEmpty(a) {
			return
		}
	}
}

// step says how a receiver goes on after one of its steps.
type step int

const (
	stepNext    step = iota // to the next step
	stepRestart             // back to taking tokens
	stepEnd                 // the receiver ends
)

// batch is one receive: the tokens it holds and the tasks it asks for.
type batch struct {
	t claimTokens
	n int
	// idle: no task ran and no other receive was in flight as it began.
	idle bool
	// seen is the write stall's epoch as the receive began.
	seen uint64
}

// ended is what a receiver saw as its receive ended, to decide what an
// empty receive means.
type ended struct {
	others int    // receives still in flight
	idle   bool   // no task runs and no receive is in flight
	limit  bool   // MaxTasks reached
	begun  uint64 // receives begun so far
	wake   <-chan struct{}
	full   <-chan struct{}
}

// acquire takes a first token, waits out a failure pause or a write stall,
// then gathers the rest of a receive's share. It returns false when the
// receiver should end.
func (d *dispatcher) acquire() (claimTokens, bool) {
	w := d.w
	for {
		var t claimTokens
		ahead, turned := d.aheadPool()
		select {
		case <-d.slots:
			t.main = 1
		case <-ahead:
			t.ahead = 1
		case <-turned:
			continue // handlers turned fast: prefetch tokens count now
		case <-w.drainCh:
			return t, false
		case <-d.quit:
			return t, false
		}
		if d.stopping() || w.pauseAfterFailures(d.quit) || w.paused.wait(w.drainCh, d.quit) || w.stall.wait(w.drainCh, d.quit) {
			return t, false
		}
		return d.gather(t)
	}
}

// begin counts a receive in and takes its share of MaxTasks, so that
// receivers together never take more than the limit. When receives in
// flight hold the rest of the budget it gives the tokens back and waits
// for them to bring tasks (stepRestart) or for the worker to end (stepEnd).
func (d *dispatcher) begin(t claimTokens) (batch, step) {
	w := d.w
	n := t.total()
	w.mu.Lock()
	if d.ended {
		w.mu.Unlock()
		return batch{}, stepEnd
	}
	if w.o.MaxTasks > 0 {
		budget := w.o.MaxTasks - d.taken - d.reserved
		if budget <= 0 {
			ch := d.wake
			w.mu.Unlock()
			d.giveBack(t, n)
			if !d.park(ch) {
				return batch{}, stepEnd
			}
			return batch{}, stepRestart
		}
		if n > budget {
			t = d.giveBack(t, n-budget)
			n = budget
		}
		d.reserved += n
	}
	d.receiving++
	d.begun++
	idle := w.running == 0 && d.receiving == 1
	w.mu.Unlock()
	return batch{t: t, n: n, idle: idle}, stepNext
}

// claim receives up to c.n tasks and gives back the tokens of those it
// did not get, or dropped because they were cancelled (dropCancelled).
func (d *dispatcher) claim(c *batch) ([]*jobq.Envelope, error) {
	w := d.w
	wait := w.o.Poll
	w.mu.Lock()
	if w.o.Wait {
		wait = d.pollWait
	} else if !c.idle || w.running > 0 || d.receiving > 1 {
		// Tasks run (or another receive may bring some) and the worker
		// exits on an empty queue: whether it is done depends on those
		// tasks (a failure may put its task back), not on a message
		// arriving, so the receive does not wait in the engine; after an
		// empty one the receiver waits for the tasks instead (awaitIdle).
		// Looked at again here, not only at begin: another receiver may
		// have begun since, or brought tasks.
		wait = 0
	}
	w.mu.Unlock()
	c.seen = w.stall.epoch()
	envs, err := w.q.ReceiveBatch(d.recvCtx, c.n, jobq.ReceiveOptions{Visibility: w.o.Visibility, Wait: wait})
	if err != nil {
		envs = nil
	}
	envs = d.dropCancelled(envs)
	c.t = d.giveBack(c.t, c.n-len(envs))
	return envs, err
}

// end counts the receive out; its got tasks count as running before it
// stops counting as in flight, so no receiver sees the worker idle between
// the two.
func (d *dispatcher) end(c batch, got int, err error) ended {
	w := d.w
	w.mu.Lock()
	defer w.mu.Unlock()
	d.receiving--
	close(d.ended1)
	d.ended1 = make(chan struct{})
	if w.o.MaxTasks > 0 {
		d.reserved -= c.n
		d.taken += got
	}
	w.running += got
	if got > 0 {
		close(d.wake)
		d.wake = make(chan struct{})
	}
	if got > 0 && got >= min(c.n, 2) {
		close(d.full)
		d.full = make(chan struct{})
	}
	if err == nil {
		d.bo.Reset()
		d.refusedBo.Reset()
		// An idle worker looks less and less often; a task found
		// brings it back to Poll.
		if got > 0 {
			d.pollWait = w.o.Poll
		} else {
			d.pollWait = min(2*d.pollWait, w.o.MaxPoll)
		}
	}
	if got > 0 {
		// An empty receive may have written nothing: only a claim proves
		// the engine writes again.
		w.stall.receiveAccepted()
	}
	return ended{
		others: d.receiving,
		idle:   w.running == 0 && d.receiving == 0,
		limit:  w.o.MaxTasks > 0 && d.taken >= w.o.MaxTasks,
		begun:  d.begun,
		wake:   d.wake,
		full:   d.full,
	}
}

// backOff handles a failed receive, begun at write stall epoch seen: it
// ends the dispatcher when the error will not go away or has lasted too
// long, else waits before the next receive. It reports whether the
// receiver should go on.
func (d *dispatcher) backOff(err error, seen uint64) bool {
	w := d.w
	if d.recvCtx.Err() != nil {
		return false
	}
	if permanent(err) {
		d.finish("receive failed", fmt.Errorf("receiving tasks: %w", err))
		return false
	}
	// A receive refused for want of resources (a full disk) is retried
	// for as long as that lasts, logged once by the write stall, and at
	// once when it began before a pause ended; any other failure ends the
	// worker after receiveGiveUp.
	var retry time.Duration
	if errcode.Of(err) == errcode.ResourceExhausted {
		if !w.stall.receiveRefused(err, seen) {
			return true
		}
		w.mu.Lock()
		retry = d.refusedBo.NextBackOff()
		w.mu.Unlock()
	} else {
		w.mu.Lock()
		retry = d.bo.NextBackOff()
		w.mu.Unlock()
		if retry == backoff.Stop {
			d.finish("receive failed", fmt.Errorf("receiving tasks failed for %v, giving up: %w", d.bo.MaxElapsedTime, err))
			return false
		}
		w.log.Warn("receive failed; retrying", "error", err, "retry_in", retry.Round(time.Millisecond))
	}
	select {
	case <-time.After(retry):
		return true
	case <-w.drainCh:
		return false
	case <-d.quit:
		return false
	}
}

// dropCancelled settles as cancelled, without running them, the received
// tasks whose cancel was requested (cancelRequestedOf), and returns the
// others. The dropped ones take
// no slot and do not count towards MaxTasks; Run waits for their
// settlements as for any task.
func (d *dispatcher) dropCancelled(envs []*jobq.Envelope) []*jobq.Envelope {
	drop := d.w.cancelRequestedOf(envs)
	if len(drop) == 0 {
		return envs
	}
	kept := make([]*jobq.Envelope, 0, len(envs)-len(drop))
	for _, env := range envs {
		if !drop[env] {
			kept = append(kept, env)
			continue
		}
		d.runners.Go(func() {
			d.w.cancel(env, taskLogger(d.w.log, env.Task.ID), time.Now(), false, 0)
		})
	}
	return kept
}

// start runs the received tasks, each on a runner of its own; the first
// t.main hold handler tokens, the rest prefetch tokens.
func (d *dispatcher) start(envs []*jobq.Envelope, t claimTokens) {
	for i, env := range envs {
		pool := d.slots
		if i >= t.main {
			pool = d.ahead
		}
		tr := &taskRun{d: d, env: env, pool: pool}
		d.handlers.join(&tr.ticket) // here, so tasks start in claim order
		d.runners.start(tr)
	}
}

// taskRun is what the worker keeps for one task from its receipt until it
// is settled, in one allocation: the handler ticket, logger, Job, lease
// renewal state, attempt and backlog place of every task would otherwise
// be an allocation each.
type taskRun struct {
	d        *dispatcher
	env      *jobq.Envelope
	pool     chan struct{} // where the task's claim token goes back
	ticket   handlerTicket
	log      taskLog
	job      Job
	lease    heldLease
	attempt  jobq.Attempt // the attempt of a success (Worker.recordInto)
	freeOnce sync.Once
	// early says the token went back when the handler returned, before the
	// settlement; the task is then in the backlog at settling.
	early    bool
	settling settling
}

// run runs the task on its runner (dispatcher.run).
func (t *taskRun) run() { t.d.run(t) }

// ran is called when the task's handler is freed: the claim token goes back
// now, so that a receive overlaps the settlement, unless the backlog of such
// tasks is full or settling too slowly (backlog.go).
func (t *taskRun) ran() {
	if t.early = t.d.unsettled.admit(&t.settling, time.Now()); t.early {
		t.pool <- struct{}{}
	}
}

// run processes one task and returns its token to its pool. The task's
// handler is freed when the handler returns, so the next task starts while
// this one settles, and so is its claim token (taskRun.ran) — unless the
// backlog is full or settling too slowly: then the token waits for this
// settlement, and claims slow down to the pace of settlement instead of
// piling finished tasks up.
func (d *dispatcher) run(t *taskRun) {
	// The task is counted, and runs in its process span, until it is
	// settled (telemetry.go): here rather than in process, whose stack
	// frame the settlement's deepest calls sit on.
	d.w.tel.hold(t.env)
	putBack := d.w.process(t)
	d.w.tel.release(t.env)
	if putBack {
		d.unspend()
	}
	if t.early {
		d.unsettled.done(&t.settling)
	} else {
		t.pool <- struct{}{}
	}
	d.taskEnded()
}

// unspend gives MaxTasks back the share of a task put back without
// running, so a worker limited to N tasks runs N, not fewer.
func (d *dispatcher) unspend() {
	w := d.w
	if w.o.MaxTasks <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	d.taken--
	close(d.wake)
	d.wake = make(chan struct{})
}

// awaitBudget is what a receiver does once MaxTasks tasks were taken: it
// waits until one of them is put back without running (unspend), then
// reports true to receive again, or until none runs, then ends the
// dispatcher and reports false.
func (d *dispatcher) awaitBudget() bool {
	w := d.w
	for {
		w.mu.Lock()
		switch {
		case d.ended:
			w.mu.Unlock()
			return false
		case d.taken+d.reserved < w.o.MaxTasks:
			w.mu.Unlock()
			return true
		case w.running == 0 && d.receiving == 0:
			w.mu.Unlock()
			d.finish("task limit reached", nil)
			return false
		}
		wake, idle := d.wake, d.idle
		w.mu.Unlock()
		select {
		case <-wake:
		case <-idle:
		case <-w.drainCh:
			return false
		case <-d.quit:
			return false
		}
	}
}

// afterEmpty decides what an empty receive means, and reports whether the
// receiver should go on.
func (d *dispatcher) afterEmpty(e ended) bool {
	w := d.w
	switch {
	case e.others > 0:
		// Another receive is in flight: let it poll, so an empty queue
		// costs one receive at a time, and resume when one brings more
		// than a single task, or all it asked for (more may be queued).
		return d.park(e.full)
	case w.o.Wait:
		return true
	case !e.idle:
		// Tasks run: look again when the last of them ends (then the
		// queue may be done), when a receive brings tasks, or after
		// busyPoll (a task may have been put back meanwhile).
		if !d.awaitIdle(e.wake) {
			return false
		}
		w.mu.Lock()
		idle := w.running == 0 && d.receiving == 0
		e.begun = d.begun
		w.mu.Unlock()
		if !idle {
			return true
		}
	}
	// The worker is idle: end it if the queue is drained.
	return !w.drained() || d.endIfQuiet(e.begun, e.wake)
}

// endIfQuiet ends the dispatcher once the queue was found drained with
// nothing running and nothing being received, unless a receive began since
// begun (during the Stats call). Then it lets that receive poll and make the
// same check, rather than take the slots back and invalidate its check in
// turn (two receivers could leapfrog forever). It reports whether the
// receiver should go on.
func (d *dispatcher) endIfQuiet(begun uint64, ch <-chan struct{}) bool {
	w := d.w
	w.mu.Lock()
	quiet := d.begun == begun && d.receiving == 0 && w.running == 0 && !d.ended
	if quiet {
		d.ended = true // atomically with the check: no receive begins now
	}
	w.mu.Unlock()
	if quiet {
		d.finish(endreason.QueueEmpty, nil)
		return false
	}
	return d.park(ch)
}

// taskEnded counts a task out of the running ones.
func (d *dispatcher) taskEnded() {
	w := d.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running--
	if w.running == 0 {
		close(d.idle)
		d.idle = make(chan struct{})
	}
}

// awaitIdle waits until no task runs, a receive brings tasks (wake is
// closed), or busyPoll passes, and reports whether the receiver should go
// on.
func (d *dispatcher) awaitIdle(wake <-chan struct{}) bool {
	w := d.w
	w.mu.Lock()
	running, idle := w.running, d.idle
	w.mu.Unlock()
	if running == 0 {
		return true
	}
	t := time.NewTimer(busyPoll)
	defer t.Stop()
	select {
	case <-idle:
	case <-wake:
	case <-t.C:
	case <-w.drainCh:
		return false
	case <-d.quit:
		return false
	}
	return true
}

// busyPoll is how long a receiver that found nothing, while tasks run and
// the worker would exit on an empty queue, waits before it looks again
// unless the tasks end first.
const busyPoll = 200 * time.Millisecond

// permanent reports whether a receive error will not go away by retrying.
func permanent(err error) bool {
	switch errcode.Of(err) {
	case errcode.InvalidArgument, errcode.PermissionDenied, errcode.Unimplemented, errcode.FailedPrecondition, errcode.NotFound:
		return true
	}
	return false
}
