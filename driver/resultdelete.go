package driver

import "context"

// ResultDeleter is implemented by ResultStore drivers that can delete
// chosen records before they expire, which Admin.PurgeWhere uses to purge
// result records by filter. Every driver that is a ResultLister is one.
type ResultDeleter interface {
	// DeleteResults deletes the records of the tasks ids, whatever their
	// state, and returns how many tasks had one. An ID with no record is
	// skipped, so a repeated call deletes nothing more. It never touches
	// a queued or running task.
	DeleteResults(ctx context.Context, ids []string) (deleted int64, err error)
}
