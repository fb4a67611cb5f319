package mem

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
)

// workerRegs holds the worker registry of every named queue of the
// process, beside the queues' stores.
var workerRegs = struct {
	sync.Mutex
	m map[string]map[string]driver.WorkerRecord // queue name -> worker ID -> record
}{m: map[string]map[string]driver.WorkerRecord{}}

var _ driver.WorkerStore = (*Driver)(nil)

// checkWorkers fails when the handle cannot serve the worker registry.
func (d *Driver) checkWorkers(ctx context.Context) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if d.level(driver.WorkerRegistry) == driver.Unsupported {
		return unimplemented(driver.WorkerRegistry)
	}
	return nil
}

// PutWorker implements driver.WorkerStore.
func (d *Driver) PutWorker(ctx context.Context, rec *driver.WorkerRecord) error {
	if err := d.checkWorkers(ctx); err != nil {
		return err
	}
	r := *rec
	r.Data = append([]byte(nil), rec.Data...)
	workerRegs.Lock()
	defer workerRegs.Unlock()
	m := workerRegs.m[d.name]
	if m == nil {
		m = map[string]driver.WorkerRecord{}
		workerRegs.m[d.name] = m
	}
	m[rec.ID] = r
	return nil
}

// ListWorkers implements driver.WorkerStore.
func (d *Driver) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	if err := d.checkWorkers(ctx); err != nil {
		return nil, err
	}
	workerRegs.Lock()
	defer workerRegs.Unlock()
	var out []*driver.WorkerRecord
	for _, r := range workerRegs.m[d.name] {
		if r.Heartbeat.Before(since) {
			continue
		}
		r.Data = append([]byte(nil), r.Data...)
		out = append(out, &r)
	}
	return out, nil
}

// PurgeWorkers implements driver.WorkerStore.
func (d *Driver) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	if err := d.checkWorkers(ctx); err != nil {
		return 0, err
	}
	workerRegs.Lock()
	defer workerRegs.Unlock()
	var n int64
	for id, r := range workerRegs.m[d.name] {
		if r.Heartbeat.Before(before) {
			delete(workerRegs.m[d.name], id)
			n++
		}
	}
	return n, nil
}
