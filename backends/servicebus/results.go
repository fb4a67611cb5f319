package servicebus

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/blobresults"
)

// Service Bus keeps no result records of its own: they are blobs in the
// Azure container the program names (results=, Options.Results), kept by
// internal/blobresults.
var _ driver.ResultStore = (*Driver)(nil)

// The Fallback texts of the Results and Cancel features.
const (
	noResults = "Service Bus has no place for result records: name an Azure blob container for them with results=azblob://ACCOUNT/CONTAINER " +
		"or results=https://ACCOUNT.blob.core.windows.net/CONTAINER?SAS in the queue URL (Options.Results with New); without one, Queue.Result, Wait and Cancel fail"
	resultsFallback = "result records are blobs in the container results= names (created on first use): a separate store, written before the message is completed, " +
		"so a crash in between leaves the record of a task that then runs again; expired records are deleted by workers (PurgeResults), and Queue.Wait polls"
	cancelFallback = "the driver does not keep scheduled messages' sequence numbers, so it cannot delete a queued or delayed task: it stays in the queue (and in its counts) " +
		"until a worker receives it, which drops it unrun and records it as cancelled"
)

// setResults gives d its result store (nil: none) and declares Results,
// Cancel, Groups and ResultHistory accordingly.
func (d *Driver) setResults(store *blobresults.Store) {
	name := "servicebus " + d.queueURL()
	if store == nil {
		d.rec.SetRecords(name, nil, noResults)
		return
	}
	d.rec.SetRecords(name, store, "")
	d.caps.Features[driver.Results] = driver.Support{Level: driver.Emulated, Fallback: resultsFallback}
	d.caps.Features[driver.Cancel] = driver.Support{Level: driver.Emulated, Fallback: cancelFallback}
	d.caps.Features[driver.Groups] = driver.Support{Level: driver.Emulated, Fallback: blobresults.GroupsFallback}
	d.caps.Features[driver.ResultHistory] = driver.Support{Level: driver.Emulated, Fallback: blobresults.HistoryFallback}
	d.caps.Features[driver.Dependencies] = driver.Support{Level: driver.Emulated, Fallback: blobresults.DependenciesFallback}
}

// PutResults implements driver.ResultStore.
func (d *Driver) PutResults(ctx context.Context, recs []*driver.ResultRecord) error {
	return d.rec.PutResults(ctx, recs)
}

// GetResults implements driver.ResultStore.
func (d *Driver) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	return d.rec.GetResults(ctx, ids)
}

// PurgeResults implements driver.ResultStore: it deletes a bounded number
// of expired records per call (workers call it now and then).
func (d *Driver) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	return d.rec.PurgeResults(ctx, now)
}

// ListResults implements driver.ResultLister: pages of the record
// container's listing.
func (d *Driver) ListResults(ctx context.Context, f driver.ResultFilter, cursor string, limit int) ([]*driver.ResultRecord, string, error) {
	return d.rec.ListResults(ctx, f, cursor, limit)
}

// GroupCounts implements driver.GroupStore from the result container
// (blobresults).
func (d *Driver) GroupCounts(ctx context.Context, name string) (*driver.GroupCounters, error) {
	return d.rec.GroupCounts(ctx, name)
}

// GroupMembers implements driver.GroupMemberLister from the result
// container's member lists.
func (d *Driver) GroupMembers(ctx context.Context, name string) ([]string, error) {
	return d.rec.GroupMembers(ctx, name)
}

// ListGroups implements driver.GroupStore.
func (d *Driver) ListGroups(ctx context.Context, limit int) ([]*driver.GroupCounters, error) {
	return d.rec.ListGroups(ctx, limit)
}
