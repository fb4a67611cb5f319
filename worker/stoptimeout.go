package worker

import (
	"fmt"
	"sync"
	"time"
)

// stopKillMarginMax caps the time between killing the tasks still running
// at a stop and the stop timeout (Options.StopTimeout), which their
// requeues have to be written in.
const stopKillMarginMax = 5 * time.Second

// stopKillMargin is how long before the stop timeout d the tasks still
// running are killed: a fifth of it, at most stopKillMarginMax.
func stopKillMargin(d time.Duration) time.Duration {
	return min(d/5, stopKillMarginMax)
}

// abandonGraceMax caps how long before the stop timeout d the settlements
// still in progress are given up, after which Run waits what is left of d
// for tasks to end: their settlements return at once then (their contexts
// are cancelled), so only a handler that ignores both its context and
// Job.Kill is still running at d. A tenth of d, at most a second.
const abandonGraceMax = time.Second

// abandonGrace is that time for the stop timeout d.
func abandonGrace(d time.Duration) time.Duration {
	return min(d/10, abandonGraceMax)
}

// stopWithin bounds a stop by d, whether or not the engine accepts writes:
// a margin before d it kills the tasks still running (their handlers only:
// refused settlements go on being retried), so that they may be requeued
// in the time left, and abandonGrace before d it gives up the settlements
// the engine has not accepted (abandon), so that Run returns by d. It
// returns early when Run does.
func (w *Worker) stopWithin(d time.Duration) {
	margin := stopKillMargin(d)
	t := time.NewTimer(d - margin)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.finished:
		return
	}
	if ids := w.reg.tasks(); len(ids) > 0 {
		w.log.Warn("stop timeout near: killing the tasks still running, so that they can be requeued in time",
			"tasks", ids, "stop_timeout", d, "left", margin)
	}
	w.killTasks()
	t.Reset(margin - abandonGrace(d))
	select {
	case <-t.C:
		w.abandon(d)
	case <-w.finished:
	}
}

// abandon gives up every settlement still in progress: the retries of
// refused ones stop and the writes in flight are cancelled. Their tasks'
// leases are left to expire, after which the tasks are delivered again.
func (w *Worker) abandon(d time.Duration) {
	ids := w.stall.pending()
	if len(ids) > 0 {
		w.log.Warn("stop timeout reached: giving up the settlements the engine has not accepted; those tasks will be delivered again once their leases expire",
			"stop_timeout", d, "tasks", ids, "visibility", w.o.Visibility)
	} else {
		w.log.Warn("stop timeout reached: giving up the settlements still in progress; their tasks will be delivered again once their leases expire",
			"stop_timeout", d, "visibility", w.o.Visibility)
	}
	w.mu.Lock()
	w.endReason = fmt.Sprintf("stopped: stop timeout %v reached; settlements not written were given up, their tasks are delivered again after their leases", d)
	w.mu.Unlock()
	close(w.giveUp)
	w.writeCancel()
}

// awaitTasks waits for the tasks to end and be settled; once the
// settlements were given up, for abandonGrace at most (the rest of the stop
// timeout).
func (w *Worker) awaitTasks(tasks *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		tasks.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-w.giveUp:
	}
	t := time.NewTimer(abandonGrace(w.o.StopTimeout))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.log.Error("tasks still running at the stop timeout (their handlers ignore cancellation): returning without them; they will be delivered again once their leases expire",
			"tasks", w.reg.tasks())
	}
}
