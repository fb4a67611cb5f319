package worker

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/jobq/jobq/driver"
)

// rollupJitter spreads the workers' rollup checks after a slot ends.
const rollupJitter = time.Minute

// rollupLoop rolls up the queue's result records (Admin.FillRollups)
// within a minute of the worker's start and after each rollup slot ends, until stop is
// closed: one indexed read per slot when another worker rolled it up,
// quietly; a warning when it fails.
func (w *Worker) rollupLoop(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTimer(w.rollupFirst)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		n, err := w.q.Admin().FillRollups(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			w.log.Warn("could not roll up the result records; trying again after the next slot", "error", err)
		case n > 0:
			w.log.Debug("result records rolled up", "slots", n)
		}
		t.Reset(rollupWait(time.Now()))
	}
}

// rollupWait is how long from now until a check after the current slot
// ends: its end, the fill's grace, and a jitter.
func rollupWait(now time.Time) time.Duration {
	next := driver.SlotStart(driver.SlotOf(now) + 1)
	return next.Sub(now) + driver.RollupFillGrace + rand.N(rollupJitter)
}
