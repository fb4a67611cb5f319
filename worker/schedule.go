package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
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
	scheduleLoop(q, log, stop)
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
// every driver.ScheduleRefresh until stop is closed. A failure is logged
// as a warning once, and again only when it changes or after it cleared.
func scheduleLoop(q *jobq.Queue, log *slog.Logger, stop <-chan struct{}) {
	t := time.NewTicker(driver.ScheduleRefresh)
	defer t.Stop()
	fire, sweep := firesSchedules(q), sweepsHeld(q)
	lastErr := ""
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
		var err error
		if fire {
			err = fireOnce(ctx, q, log)
		}
		if sweep {
			err = errors.Join(err, sweepOnce(ctx, q, log))
		}
		cancel()
		switch {
		case err != nil && err.Error() != lastErr:
			log.Warn("could not fire the queue's schedules or sweep its held tasks; trying again", "error", err, "next_in", driver.ScheduleRefresh)
			lastErr = err.Error()
		case err == nil && lastErr != "":
			log.Info("schedules and held tasks are handled again")
			lastErr = ""
		}
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}

// fireOnce fires the due slots of the queue's schedules.
func fireOnce(ctx context.Context, q *jobq.Queue, log *slog.Logger) error {
	runs, err := q.Admin().FireSchedules(ctx, time.Now())
	for _, r := range runs {
		log.Info("schedule fired", "schedule", r.Name, "slot", r.Slot.UTC().Format(time.RFC3339), "task_id", r.TaskID, "duplicate", r.Duplicate, "take_over", r.TakeOver)
	}
	return err
}

// sweepOnce releases or cancels the held tasks whose parents ended.
func sweepOnce(ctx context.Context, q *jobq.Queue, log *slog.Logger) error {
	res, err := q.Admin().SweepHeld(ctx)
	for _, id := range res.Released {
		log.Info("held task released: its parents ended", "task_id", id)
	}
	for _, id := range res.Cancelled {
		log.Info("held task cancelled: a parent did not succeed (its record says which)", "task_id", id)
	}
	return err
}
