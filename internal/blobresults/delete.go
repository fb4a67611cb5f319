package blobresults

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
)

// DeleteResults implements driver.ResultDeleter: it deletes the record
// blobs of ids, parallelism at a time; a missing blob (no record, or
// deleted already) is skipped.
func (s *Store) DeleteResults(ctx context.Context, ids []string) (int64, error) {
	var n atomic.Int64
	err := each(ctx, len(ids), func(ctx context.Context, i int) error {
		_, err := s.client.NewBlobClient(blobName(ids[i])).Delete(ctx, nil)
		switch {
		case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound):
			return nil
		case err != nil:
			return s.errorf(err, "delete the record of task %q", ids[i])
		}
		n.Add(1)
		return nil
	})
	return n.Load(), err
}

// DeleteResults implements driver.ResultDeleter for the backend's store.
func (r *Records) DeleteResults(ctx context.Context, ids []string) (int64, error) {
	s, err := r.get("delete results")
	if err != nil {
		return 0, err
	}
	return s.DeleteResults(ctx, ids)
}

// ForgetRequeued deletes the records of tasks ids, requeued from the dead
// letters, so that a wait waits for their new runs (driver.Driver's
// RequeueDead), in parallel; without a store it does nothing, and empty
// ids are skipped.
func (r *Records) ForgetRequeued(ctx context.Context, ids ...string) error {
	if r.store == nil {
		return nil
	}
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == "" })
	if len(ids) == 0 {
		return nil
	}
	_, err := r.store.DeleteResults(ctx, ids)
	return err
}
