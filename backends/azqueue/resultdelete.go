package azqueue

import (
	"context"

	"github.com/jobq/jobq/driver"
)

var _ driver.ResultDeleter = (*Driver)(nil)

// DeleteResults implements driver.ResultDeleter: it deletes the record
// blobs (blobresults).
func (d *Driver) DeleteResults(ctx context.Context, ids []string) (int64, error) {
	return d.rec.DeleteResults(ctx, ids)
}
