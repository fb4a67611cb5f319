package blobresults

import (
	"context"
	"net/url"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// FromClient returns the store in the container client serves, named by
// its URL without the query (which may hold a SAS).
func FromClient(client *container.Client) *Store {
	where := "the result container"
	if u, err := url.Parse(client.URL()); err == nil {
		u.RawQuery, u.User = "", nil
		where = u.String()
	}
	return New(client, where)
}

// Records implements driver.ResultStore for an Azure driver that embeds
// it: with a Store it forwards to it, without one every method fails with
// Unimplemented and says why and how to configure a container.
type Records struct {
	store *Store
	name  string // the queue, as "backend QUEUE", for messages
	why   string
}

// SetRecords gives r its store, or, when s is nil, the reason there is
// none (for example "no result container: add results=... to the URL").
// name names the queue in messages, such as "azqueue ACCOUNT/QUEUE".
func (r *Records) SetRecords(name string, s *Store, why string) {
	r.name, r.store, r.why = name, s, why
}

func (r *Records) get(op string) (*Store, error) {
	if r.store == nil {
		return nil, driver.Errorf(errcode.Unimplemented, "%s on %s: result records are not available: %s", op, r.name, r.why)
	}
	return r.store, nil
}

// PutResults implements driver.ResultStore.
func (r *Records) PutResults(ctx context.Context, recs []*driver.ResultRecord) error {
	s, err := r.get("store results")
	if err != nil {
		return err
	}
	return s.PutResults(ctx, recs)
}

// GetResults implements driver.ResultStore.
func (r *Records) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	s, err := r.get("read results")
	if err != nil {
		return nil, err
	}
	return s.GetResults(ctx, ids)
}

// PurgeResults implements driver.ResultStore: a bounded number of expired
// records per call (workers call it now and then).
func (r *Records) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	s, err := r.get("purge results")
	if err != nil {
		return 0, err
	}
	return s.PurgeResults(ctx, now)
}
