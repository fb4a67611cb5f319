package worker

import (
	"context"
	"math/rand/v2"
	"time"
)

// purgeEvery is about how often a worker purges the queue's expired result
// records; each wait is drawn between half and one and a half times it, so
// that workers started together spread their purges.
const purgeEvery = 10 * time.Minute

// purgeTimeout bounds one purge.
const purgeTimeout = 2 * time.Minute

// purgesResults reports whether the backend keeps result records, which
// workers purge now and then when the engine does not expire them itself.
func (w *Worker) purgesResults() bool {
	return w.keepsResults
}

// purgeLoop purges the expired result records about every w.purgeEvery until
// stop is closed: quietly when it works, with a warning when it fails.
func (w *Worker) purgeLoop(stop <-chan struct{}) {
	t := time.NewTimer(purgeWait(w.purgeEvery))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), purgeTimeout)
		n, err := w.q.Admin().PurgeResults(ctx)
		cancel()
		if err != nil {
			w.log.Warn("could not purge the expired result records; trying again later", "error", err, "next_in", w.purgeEvery)
		} else {
			w.log.Debug("expired result records purged", "purged", n)
		}
		t.Reset(purgeWait(w.purgeEvery))
	}
}

// purgeWait is a wait between purges: every with ±50% jitter.
func purgeWait(every time.Duration) time.Duration {
	return every/2 + rand.N(every)
}
