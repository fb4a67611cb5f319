package blobresults

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
)

// ListResults implements driver.ResultLister: one page of the container's
// listing (limit blobs, with their metadata), the cursor being Blob
// Storage's continuation marker. The records the metadata does not rule
// out (expired, another state, a worker record) are downloaded, limit at
// most, parallelism at a time.
func (s *Store) ListResults(ctx context.Context, f driver.ResultFilter, cursor string, limit int) ([]*driver.ResultRecord, string, error) {
	max32 := int32(limit)
	opts := &container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Metadata: true}, MaxResults: &max32}
	if cursor != "" {
		opts.Marker = &cursor
	}
	resp, err := s.client.NewListBlobsFlatPager(opts).NextPage(ctx)
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", s.errorf(err, "list result records")
	}
	now := time.Now()
	var names []string
	for _, b := range resp.Segment.BlobItems {
		if listable(b, f, now) {
			names = append(names, *b.Name)
		}
	}
	recs := make([]*driver.ResultRecord, len(names))
	err = each(ctx, len(names), func(ctx context.Context, i int) error {
		r, err := s.download(ctx, names[i])
		if err == nil && r != nil && r.ExpiresAt.After(now) && (f.State == "" || r.State == f.State) && !r.UpdatedAt.Before(f.Since) {
			recs[i] = r
		}
		return err
	})
	if err != nil {
		return nil, "", err
	}
	out := recs[:0]
	for _, r := range recs {
		if r != nil {
			out = append(out, r)
		}
	}
	next := ""
	if resp.NextMarker != nil {
		next = *resp.NextMarker
	}
	return out, next, nil
}

// download reads the record blob name; nil when it is gone or is not a
// record jobq wrote.
func (s *Store) download(ctx context.Context, name string) (*driver.ResultRecord, error) {
	resp, err := s.client.NewBlobClient(name).DownloadStream(ctx, nil)
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound):
		return nil, nil
	case err != nil:
		return nil, s.errorf(err, "read the result record %s", name)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, s.errorf(err, "read the result record %s", name)
	}
	r, err := decode(buf.Bytes())
	if err != nil {
		return nil, nil
	}
	return r, nil
}

// ListResults implements driver.ResultLister for the backend's store.
func (r *Records) ListResults(ctx context.Context, f driver.ResultFilter, cursor string, limit int) ([]*driver.ResultRecord, string, error) {
	s, err := r.get("list results")
	if err != nil {
		return nil, "", err
	}
	return s.ListResults(ctx, f, cursor, limit)
}

// listable reports whether listed blob b may be a record that passes f:
// not a worker or group blob, not expired, in f's state.
func listable(b *container.BlobItem, f driver.ResultFilter, now time.Time) bool {
	if b.Name == nil || strings.HasPrefix(*b.Name, workerPrefix) || strings.HasPrefix(*b.Name, groupPrefix) || strings.HasPrefix(*b.Name, heldPrefix) || expired(b.Metadata, now) {
		return false
	}
	st := b.Metadata[metaState]
	return f.State == "" || st == nil || *st == string(f.State)
}
