package blobresults

import (
	"context"
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

// ForgetRequeued deletes the record of task id, requeued from the dead
// letters, so that a wait waits for its new run (driver.Driver's
// RequeueDead); without a store, or for an empty id, it does nothing.
func (r *Records) ForgetRequeued(ctx context.Context, id string) error {
	if r.store == nil || id == "" {
		return nil
	}
	_, err := r.store.DeleteResults(ctx, []string{id})
	return err
}
