package servicebus

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
)

// The worker registry (driver.WorkerStore) lives in the blob container of
// the result records (results=), beside them under workers/
// (internal/blobresults): a Service Bus queue can hold no per-worker
// records that can be listed and replaced.
var _ driver.WorkerStore = (*Driver)(nil)

// workerRegistryFallback is the worker-registry declaration's Fallback
// text when the result container is available.
const workerRegistryFallback = "worker records are blobs under workers/ in the result container results= names: a separate store, with one blob write per worker heartbeat and a listing plus a read per worker for `jobq QUEUE workers`"

// setWorkers declares the worker registry: emulated with the result
// container, unsupported (saying why) without it.
func (d *Driver) setWorkers() {
	d.caps.Features[driver.WorkerRegistry] = d.rec.WorkerSupport(workerRegistryFallback)
}

// PutWorker implements driver.WorkerStore.
func (d *Driver) PutWorker(ctx context.Context, rec *driver.WorkerRecord) error {
	return d.rec.PutWorker(ctx, rec)
}

// ListWorkers implements driver.WorkerStore.
func (d *Driver) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	return d.rec.ListWorkers(ctx, since)
}

// PurgeWorkers implements driver.WorkerStore.
func (d *Driver) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	return d.rec.PurgeWorkers(ctx, before)
}
