package worker

import (
	"context"
	"log/slog"
	"time"
)

// SetPrefetchBar sets the mean handler duration under which w prefetches,
// so that a test of prefetching does not depend on how loaded the machine
// running it is.
func SetPrefetchBar(w *Worker, d time.Duration) { w.pace.fastBelow = d }

// SetReceiveGiveUp sets how long receives may fail before w gives up, so a
// test need not wait five minutes.
func SetReceiveGiveUp(w *Worker, d time.Duration) { w.receiveGiveUp = d }

// RunGate runs a gate command as the default GateRunner does.
func RunGate(ctx context.Context, cmd string, passEnv []string) error {
	return runGate(ctx, cmd, 10*time.Second, passEnv, slog.New(slog.DiscardHandler))
}

// SetPurgeEvery sets about how often w purges expired result records, so
// that a test need not wait ten minutes.
func SetPurgeEvery(w *Worker, d time.Duration) { w.purgeEvery = d }

// SetRollupFirst sets when w first checks the result rollups after it
// starts, so that a test need not wait up to a minute.
func SetRollupFirst(w *Worker, d time.Duration) { w.rollupFirst = d }
