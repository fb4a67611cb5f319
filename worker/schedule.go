package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
)

// scheduleTimeout bounds one pass over the queue's schedules.
const scheduleTimeout = 30 * time.Second

// stopGrace is how long a pass under way may go on once the worker or
// scheduler stops.
const stopGrace = 2 * time.Second

// RunScheduler fires the queue's recurring schedules (Admin.FireSchedules)
// and decides its held tasks (Admin.SweepHeld: dependencies and group
// steps) every driver.ScheduleRefresh until ctx ends, and returns nil
// then: what `jobq QUEUE scheduler` runs for a queue without long-lived
// workers. Workers do the same in the background unless
// Options.NoSchedules is set; any number of them and of schedulers may
// run at once. log may be nil.
func RunScheduler(ctx context.Context, q *jobq.Queue, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if !firesSchedules(q) && !sweepsHeld(q) {
		_, err := q.Admin().FireSchedules(ctx, time.Now()) // the Unimplemented error, with its explanation
		return err
	}
	stop := make(chan struct{})
	go func() {
		<-ctx.Done()
		close(stop)
	}()
	scheduleLoop(q, log, stop, driver.ScheduleRefresh, new(heldSweeps)) // a scheduler of its own stays prompt
	return nil
}

// firesSchedules and sweepsHeld report whether the queue's backend keeps
// schedules and held tasks (which need result records): what the
// background loop has to do.
func firesSchedules(q *jobq.Queue) bool {
	return q.Capabilities().Level(driver.Schedules) != driver.Unsupported
}

func sweepsHeld(q *jobq.Queue) bool {
	c := q.Capabilities()
	return c.Level(driver.Dependencies) != driver.Unsupported && c.Level(driver.Results) != driver.Unsupported
}

// scheduleLoop fires due slots and sweeps the held tasks at once and then
// every driver.ScheduleRefresh until stop is closed. While its passes find
// nothing to watch (no held task, nothing fired or released), the pause
// between them doubles up to maxWait, and it never outlasts the next slot
// of a schedule: an idle fleet's loops then cost about one read each per
// maxWait, where they cost two every 2 s. A failure is logged as a warning
// once, and again only when it changes or after it cleared.
func scheduleLoop(q *jobq.Queue, log *slog.Logger, stop <-chan struct{}, maxWait time.Duration, sweeps *heldSweeps) {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	fire, sweep := firesSchedules(q), sweepsHeld(q)
	lastErr := ""
	idle := driver.ScheduleRefresh
	for {
		// A pass gets stopGrace after stop to finish: a slot claimed and
		// not pushed would wait for another scheduler's take-over.
		ctx, cancel := context.WithTimeout(context.Background(), scheduleTimeout)
		go func() {
			select {
			case <-stop:
			case <-ctx.Done():
				return
			}
			select {
			case <-time.After(stopGrace):
				cancel()
			case <-ctx.Done():
			}
		}()
		now := time.Now()
		var p schedulePass
		if fire {
			p.err = fireOnce(ctx, q, log, now, &p)
		}
		if sweep {
			p.err = errors.Join(p.err, sweepOnce(ctx, q, log, &p, sweeps))
		}
		cancel()
		switch err := p.err; {
		case err != nil && err.Error() != lastErr:
			log.Warn("could not fire the queue's schedules or sweep its held tasks; trying again", "error", err, "next_in", driver.ScheduleRefresh)
			lastErr = err.Error()
		case err == nil && lastErr != "":
			log.Info("schedules and held tasks are handled again")
			lastErr = ""
		}
		var wait time.Duration
		wait, idle = p.pause(idle, maxWait, now)
		t.Reset(wait)
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}

// schedulePass is what one pass of scheduleLoop found.
type schedulePass struct {
	acted bool      // it fired a slot, or released or cancelled a held task
	held  int       // held tasks it read
	next  time.Time // the earliest next slot of the schedules; zero: none
	err   error
}

// pause returns how long scheduleLoop waits after the pass p, which ran at
// now, and its idle pause after it (idle before). A pass that acted, read
// held tasks or failed is followed by the next in driver.ScheduleRefresh;
// one that found nothing to watch doubles the idle pause, up to maxWait
// (at least driver.ScheduleRefresh), and a schedule's next slot shortens
// it to that slot.
func (p schedulePass) pause(idle, maxWait time.Duration, now time.Time) (wait, nextIdle time.Duration) {
	if p.acted || p.held > 0 || p.err != nil {
		return driver.ScheduleRefresh, driver.ScheduleRefresh
	}
	nextIdle = min(2*idle, max(maxWait, driver.ScheduleRefresh))
	wait = nextIdle
	if !p.next.IsZero() {
		wait = min(wait, max(p.next.Sub(now), driver.ScheduleRefresh))
	}
	return wait, nextIdle
}

// fireOnce fires the due slots of the queue's schedules.
func fireOnce(ctx context.Context, q *jobq.Queue, log *slog.Logger, now time.Time, p *schedulePass) error {
	runs, next, err := hooks.FireSchedules(ctx, q, now, nil)
	for _, r := range runs {
		log.Info("schedule fired", "schedule", r.Name, "slot", r.Slot.UTC().Format(time.RFC3339), "task_id", r.TaskID, "duplicate", r.Duplicate, "take_over", r.TakeOver)
	}
	p.acted = p.acted || len(runs) > 0
	p.next = next
	return err
}

// heldSweeps serialises one process's sweeps of held tasks (a worker's
// background loop's and its check that the queue is drained) and counts
// the tasks they released: two sweeps race for a task, and the one that
// loses it must still learn that it was queued, or a worker without
// --wait would end with a task just released and nobody to run it.
type heldSweeps struct {
	mu       sync.Mutex
	released atomic.Int64
}

// sweep is hooks.SweepHeld of q, one at a time; it logs each task it
// released or cancelled (log nil: none).
func (s *heldSweeps) sweep(ctx context.Context, q *jobq.Queue, log *slog.Logger) (released, cancelled []string, held int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	released, cancelled, held, err = hooks.SweepHeld(ctx, q)
	s.released.Add(int64(len(released)))
	if log != nil {
		for _, id := range released {
			log.Info("held task released: its parents ended", "task_id", id)
		}
		for _, id := range cancelled {
			log.Info("held task cancelled: a parent did not succeed (its record says which)", "task_id", id)
		}
	}
	return released, cancelled, held, err
}

// sweepOnce releases or cancels the held tasks whose parents ended.
func sweepOnce(ctx context.Context, q *jobq.Queue, log *slog.Logger, p *schedulePass, sweeps *heldSweeps) error {
	released, cancelled, held, err := sweeps.sweep(ctx, q, log)
	p.acted = p.acted || len(released)+len(cancelled) > 0
	p.held = held
	return err
}
