package driver

import (
	"context"
	"time"
)

// ResultFilter selects result records to list (ResultLister).
type ResultFilter struct {
	// State keeps only records in this state; empty keeps all.
	State ResultState
	// Since keeps only records whose UpdatedAt (when the record was last
	// written: for a final record, when the task ended) is at or after
	// it; zero keeps all.
	Since time.Time
	// Group keeps only the records of tasks of this group (Task.Group);
	// empty keeps all. Drivers ignore it: the group is in the record's
	// data, which the portable layer reads.
	Group string
}

// ResultLister is implemented by ResultStore drivers that can list their
// records page by page, which Admin.ExportResults uses to stream any
// number of them in constant memory.
type ResultLister interface {
	// ListResults returns up to limit unexpired records that pass f's
	// State and Since, after the position cursor ("" for the start), and
	// the cursor of the next page: "" when there is none. The order is
	// the driver's, stable across pages (by task ID, say), so that a
	// listing meets every record that exists from its start to its end
	// exactly once; records written or purged meanwhile may be met or
	// not. A page may hold fewer than limit records before the end
	// (records filtered out), even none with a non-empty next. The
	// cursor is opaque to callers.
	ListResults(ctx context.Context, f ResultFilter, cursor string, limit int) (recs []*ResultRecord, next string, err error)
}
