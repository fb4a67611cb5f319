package sqlite

import (
	"context"
	"strconv"
)

// Space given back. A new file is created with auto_vacuum=INCREMENTAL
// (dsn), so pages freed by completed messages can be returned to the file
// system; a file created before that (or by another tool) keeps
// auto_vacuum=NONE, where freed pages are only reused, until it is
// converted once offline (docs/backends/sqlite.md). The driver never runs
// a full VACUUM itself: it holds the write lock for as long as it takes to
// rewrite the whole file.
//
// When a receive finds nothing to claim, the driver looks at the file's
// free-page count (a read of the header, no lock) and, if at least
// reclaimMinPages are free, runs one incremental_vacuum step of at most
// reclaimStepPages in its own short write transaction. A waiting receiver
// repeats this on every poll, so an idle queue shrinks within seconds of a
// drain, while a busy one is never held up: the step is skipped whenever
// this driver's writer or another process holds the write lock. The file
// itself shrinks when the WAL is checkpointed, which each step does.
const (
	reclaimMinPages  = 256  // 512 KiB at newPageSize
	reclaimStepPages = 1024 // 2 MiB: a few milliseconds of page moves
)

// incrementalVacuum reports whether the file is in auto_vacuum=INCREMENTAL
// mode (2).
func (d *Driver) incrementalVacuum(ctx context.Context) (bool, error) {
	var mode int
	err := d.idle.conn.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode)
	return mode == 2, err
}

// reclaim runs one bounded incremental_vacuum step when the file has
// enough free pages and the write lock is free at once. It is best effort:
// errors are logged at debug level and otherwise ignored, since the queue
// works the same with the pages kept.
//
// Before that, it runs a step of a due or running sweep of stale dedup
// keys (keys.go), in the same transaction, so that a drained queue gives
// back its keys' pages too.
func (d *Driver) reclaim(ctx context.Context) {
	sweep := d.idle.needsSweep(ctx, d.cfg.queue)
	vacuum := d.autoVacuum && d.idle.needsReclaim(ctx)
	if !sweep && !vacuum {
		return
	}
	select {
	case d.writeSem <- struct{}{}:
	default:
		return // a write is under way; the next idle look tries again
	}
	defer func() { <-d.writeSem }()
	select {
	case <-d.closing.Done():
		return
	default:
	}
	bg := context.WithoutCancel(ctx) // see wtx: nothing here waits
	if _, err := d.w.exec(bg, "BEGIN IMMEDIATE"); err != nil {
		return // busy: another process writes
	}
	var err error
	if sweep {
		_, err = d.sweepKeys(wtx{d.w, bg}, sweepChunkIdle, true)
	}
	if err == nil && vacuum {
		_, err = d.w.exec(bg, "PRAGMA incremental_vacuum("+strconv.Itoa(reclaimStepPages)+")")
	}
	if err == nil {
		_, err = d.w.exec(bg, "COMMIT")
	}
	if err != nil {
		_, _ = d.w.exec(bg, "ROLLBACK")
		d.log.DebugContext(ctx, "sqlite: key sweep or incremental vacuum step failed", "err", err)
		return
	}
	// The file shrinks only when a checkpoint copies the step into it, and
	// the automatic one waits for walCheckpointPages of WAL, which the last
	// steps of a drain may never reach on an idle queue: the file kept its
	// peak size until the next burst of work. A passive checkpoint never
	// waits for readers or writers.
	if _, err := d.w.exec(bg, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		d.log.DebugContext(ctx, "sqlite: checkpoint after a vacuum step failed", "err", err)
	}
}

// needsReclaim reports whether the file has at least reclaimMinPages free.
// Once it found too few, it answers no for the cost of one PRAGMA
// data_version until another connection commits.
func (w *idleWatch) needsReclaim(ctx context.Context) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	var v int64
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return false
	}
	if w.fewFree && v == w.fewFreeVersion {
		return false
	}
	var free int
	if err := w.conn.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
		return false
	}
	w.fewFree, w.fewFreeVersion = free < reclaimMinPages, v
	return !w.fewFree
}
