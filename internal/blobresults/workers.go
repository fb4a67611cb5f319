package blobresults

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// The worker registry (driver.WorkerStore) shares the container of the
// result records: each worker is the block blob workerPrefix+blobName(ID),
// whose body is the portable layer's data and whose metadata carries the
// ID, the heartbeat and whether the worker withdrew, so that listings and
// purges read no bodies they do not need. The names cannot clash with
// result records, whose names hold no "/". The blob's expiry entry is the
// heartbeat plus driver.WorkerRetention, so PurgeResults deletes forgotten worker
// records too.
const workerPrefix = "workers/"

// Metadata keys of a worker blob (besides metaExpires).
const (
	metaWorker    = "jobqworker" // the worker ID, URL-escaped (metadata is ASCII)
	metaHeartbeat = "jobqheartbeat"
	metaWithdrawn = "jobqwithdrawn"
)

// PutWorker implements driver.WorkerStore.
func (s *Store) PutWorker(ctx context.Context, rec *driver.WorkerRecord) error {
	withdrawn := "0"
	if rec.Withdrawn {
		withdrawn = "1"
	}
	meta := map[string]*string{
		metaWorker:    to.Ptr(url.QueryEscape(rec.ID)),
		metaHeartbeat: to.Ptr(strconv.FormatInt(rec.Heartbeat.UnixMilli(), 10)),
		metaWithdrawn: to.Ptr(withdrawn),
		metaExpires:   to.Ptr(strconv.FormatInt(rec.Heartbeat.Add(driver.WorkerRetention).UnixMilli(), 10)),
	}
	name := workerPrefix + blobName(rec.ID)
	return s.putBlob(ctx, name, "application/json", rec.Data, meta, fmt.Sprintf("write the record of worker %q", rec.ID))
}

// workerBlob is one listed worker blob.
type workerBlob struct {
	name string
	rec  driver.WorkerRecord
}

// listWorkers lists the worker blobs and reads their metadata.
func (s *Store) listWorkers(ctx context.Context) ([]workerBlob, error) {
	var out []workerBlob
	opts := &container.ListBlobsFlatOptions{Prefix: to.Ptr(workerPrefix), Include: container.ListBlobsInclude{Metadata: true}}
	found, err := s.eachBlob(ctx, opts, "list worker records", func(b *container.BlobItem) error {
		if wb, ok := parseWorkerBlob(b); ok {
			out = append(out, wb)
		}
		return nil
	})
	if !found {
		return nil, err
	}
	return out, nil
}

// parseWorkerBlob reads a listed worker blob's metadata; false when it
// lacks the worker ID or a heartbeat.
func parseWorkerBlob(b *container.BlobItem) (workerBlob, bool) {
	wb := workerBlob{name: *b.Name}
	ok := false
	for k, v := range b.Metadata {
		if v == nil {
			continue
		}
		switch strings.ToLower(k) {
		case metaWorker:
			if id, err := url.QueryUnescape(*v); err == nil {
				wb.rec.ID = id
			}
		case metaHeartbeat:
			ms, err := strconv.ParseInt(*v, 10, 64)
			ok = err == nil
			wb.rec.Heartbeat = time.UnixMilli(ms).UTC()
		case metaWithdrawn:
			wb.rec.Withdrawn = *v == "1"
		}
	}
	return wb, ok && wb.rec.ID != ""
}

// ListWorkers implements driver.WorkerStore: one listing, then one
// download per worker heartbeating since since.
func (s *Store) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	all, err := s.listWorkers(ctx)
	if err != nil {
		return nil, err
	}
	var keep []workerBlob
	for _, wb := range all {
		if !wb.rec.Heartbeat.Before(since) {
			keep = append(keep, wb)
		}
	}
	out := make([]*driver.WorkerRecord, len(keep))
	err = each(ctx, len(keep), func(ctx context.Context, i int) error {
		resp, err := s.client.NewBlobClient(keep[i].name).DownloadStream(ctx, nil)
		switch {
		case bloberror.HasCode(err, bloberror.BlobNotFound):
			return nil // purged meanwhile
		case err != nil:
			return s.errorf(err, "read the record of worker %q", keep[i].rec.ID)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			return s.errorf(err, "read the record of worker %q", keep[i].rec.ID)
		}
		r := keep[i].rec
		r.Data = buf.Bytes()
		out[i] = &r
		return nil
	})
	if err != nil {
		return nil, err
	}
	recs := out[:0]
	for _, r := range out {
		if r != nil {
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// PurgeWorkers implements driver.WorkerStore.
func (s *Store) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	all, err := s.listWorkers(ctx)
	if err != nil {
		return 0, err
	}
	var old []workerBlob
	for _, wb := range all {
		if wb.rec.Heartbeat.Before(before) {
			old = append(old, wb)
		}
	}
	var (
		n  int64
		mu sync.Mutex
	)
	err = each(ctx, len(old), func(ctx context.Context, i int) error {
		_, err := s.client.NewBlobClient(old[i].name).Delete(ctx, nil)
		switch {
		case err == nil:
			mu.Lock()
			n++
			mu.Unlock()
			return nil
		case bloberror.HasCode(err, bloberror.BlobNotFound):
			return nil
		default:
			return s.errorf(err, "delete the record of worker %q", old[i].rec.ID)
		}
	})
	return n, err
}

// PutWorker implements driver.WorkerStore.
func (r *Records) PutWorker(ctx context.Context, rec *driver.WorkerRecord) error {
	s, err := r.workers("write a worker record")
	if err != nil {
		return err
	}
	return s.PutWorker(ctx, rec)
}

// ListWorkers implements driver.WorkerStore.
func (r *Records) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	s, err := r.workers("list workers")
	if err != nil {
		return nil, err
	}
	return s.ListWorkers(ctx, since)
}

// PurgeWorkers implements driver.WorkerStore.
func (r *Records) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	s, err := r.workers("purge worker records")
	if err != nil {
		return 0, err
	}
	return s.PurgeWorkers(ctx, before)
}

// WorkerSupport is the worker-registry declaration of a driver whose
// registry lives in r's container: Emulated with fallback when r has a
// store, Unsupported saying why when it has none.
func (r *Records) WorkerSupport(fallback string) driver.Support {
	if r.store == nil {
		return driver.Support{Level: driver.Unsupported, Fallback: "the worker registry needs the result container: " + r.why}
	}
	return driver.Support{Level: driver.Emulated, Fallback: fallback}
}

// workers returns the store, or an Unimplemented error saying that the
// worker registry needs the result container.
func (r *Records) workers(op string) (*Store, error) {
	if r.store == nil {
		return nil, driver.Errorf(errcode.Unimplemented, "%s on %s: the worker registry lives in the result container, which is not available: %s", op, r.name, r.why)
	}
	return r.store, nil
}
