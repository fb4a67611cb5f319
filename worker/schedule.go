package worker

import (
	"context"
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
// every driver.ScheduleRefresh until ctx ends, and returns nil then: what
// `jobq QUEUE scheduler` runs for a queue without long-lived workers.
// Workers do the same in the background unless Options.NoSchedules is set;
// any number of them and of schedulers may run at once. log may be nil.
func RunScheduler(ctx context.Context, q *jobq.Queue, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if q.Capabilities().Level(driver.Schedules) == driver.Unsupported {
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

// scheduleLoop fires due slots at once and then every
// driver.ScheduleRefresh until stop is closed. A failure is logged as a
// warning once, and again only when it changes or after it cleared.
func scheduleLoop(q *jobq.Queue, log *slog.Logger, stop <-chan struct{}) {
	t := time.NewTicker(driver.ScheduleRefresh)
	defer t.Stop()
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
		runs, err := q.Admin().FireSchedules(ctx, time.Now())
		cancel()
		for _, r := range runs {
			log.Info("schedule fired", "schedule", r.Name, "slot", r.Slot.UTC().Format(time.RFC3339), "task_id", r.TaskID, "duplicate", r.Duplicate, "take_over", r.TakeOver)
		}
		switch {
		case err != nil && err.Error() != lastErr:
			log.Warn("could not fire the queue's schedules; trying again", "error", err, "next_in", driver.ScheduleRefresh)
			lastErr = err.Error()
		case err == nil && lastErr != "":
			log.Info("schedules fire again")
			lastErr = ""
		}
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}
