package azqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/blobresults"
)

// ResultsSuffix is appended to a queue's name to name the blob container
// of its result records, unless the results= parameter (or
// Options.ResultsContainer) names another.
const ResultsSuffix = "-results"

// Storage Queue keeps no result records of its own: they are blobs in a
// container of the same storage account, kept by internal/blobresults.
var _ driver.ResultStore = (*Driver)(nil)

// The Fallback texts of the Results and Cancel features.
const (
	resultsFallback = "result records are blobs in the container <queue>" + ResultsSuffix +
		" of the queue's storage account (results= names another; it is created on first use): a separate store, written before the message is deleted, so a crash in between leaves the record of a task that then runs again; expired records are deleted by workers (PurgeResults), and Queue.Wait polls"
	cancelFallback = "Storage Queue cannot delete a message by task ID: a cancelled task that is queued or delayed stays in the queue (and in its counts) until a worker receives it, which drops it unrun and records it as cancelled"
)

// DefaultResultsContainer is the name of the result container of queue:
// queue+ResultsSuffix, or, when that is longer than Azure's 63 characters,
// the queue name cut short followed by a hash of the whole name.
func DefaultResultsContainer(queue string) string {
	name := queue + ResultsSuffix
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(queue))
	head := strings.TrimRight(queue[:63-len(ResultsSuffix)-9], "-")
	return head + "-" + hex.EncodeToString(sum[:4]) + ResultsSuffix
}

// resultsName is the result container's name in c.
func (c config) resultsName() string {
	if c.results != "" {
		return c.results
	}
	return DefaultResultsContainer(c.queue)
}

// blobServiceURL is the blob service of the account whose queue service
// is at queueURL: ACCOUNT.queue.HOST becomes ACCOUNT.blob.HOST, and
// Azurite's queue port 10001 its blob port 10000.
func blobServiceURL(queueURL string) (string, error) {
	u, err := url.Parse(queueURL)
	if err != nil || u.Host == "" {
		return "", driver.Errorf(errcode.InvalidArgument, "queue service URL %q does not parse", queueURL)
	}
	u.RawQuery = ""
	host, port, _ := net.SplitHostPort(u.Host)
	switch {
	case strings.Contains(u.Host, ".queue."):
		u.Host = strings.Replace(u.Host, ".queue.", ".blob.", 1)
	case port == "10001":
		u.Host = net.JoinHostPort(host, "10000")
	default:
		return "", driver.Errorf(errcode.FailedPrecondition,
			"cannot tell the blob service of queue service %s (neither ACCOUNT.queue.HOST nor Azurite's port 10001)", u.Redacted())
	}
	return u.String(), nil
}

// resultsSource builds the client of a result container by name, with
// the credentials the queue uses; nil when there is none (New without
// Options.Results).
type resultsSource func(name string) (*container.Client, error)

// fromConnectionString is the resultsSource of a storage connection
// string. One that names only a queue endpoint gets the matching blob
// endpoint (blobServiceURL).
func fromConnectionString(cs string) resultsSource {
	return func(name string) (*container.Client, error) {
		var queueEP string
		hasBlob := false
		for part := range strings.SplitSeq(cs, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch {
			case strings.EqualFold(k, "BlobEndpoint"):
				hasBlob = true
			case strings.EqualFold(k, "QueueEndpoint"):
				queueEP = v
			}
		}
		full := cs
		if !hasBlob && queueEP != "" {
			blobEP, err := blobServiceURL(queueEP)
			if err != nil {
				return nil, driver.Errorf(errcode.FailedPrecondition, "%v: add BlobEndpoint=... to the connection string", err)
			}
			full = strings.TrimRight(cs, ";") + ";BlobEndpoint=" + blobEP
		}
		c, err := container.NewClientFromConnectionString(full, name, nil)
		if err != nil {
			return nil, driver.Errorf(errcode.InvalidArgument, "the connection string does not serve Blob Storage for the result container %s", name)
		}
		return c, nil
	}
}

// fromCredential is the resultsSource of an Entra ID credential and the
// queue service URL.
func fromCredential(queueURL string, cred azcore.TokenCredential) resultsSource {
	return func(name string) (*container.Client, error) {
		blobURL, err := blobServiceURL(queueURL)
		if err != nil {
			return nil, err
		}
		c, err := container.NewClient(strings.TrimRight(blobURL, "/")+"/"+name, cred, nil)
		if err != nil {
			return nil, driver.Errorf(errcode.InvalidArgument, "result container %s: %w", name, err)
		}
		return c, nil
	}
}

// setResults gives d its result store, from client when the program
// passed one, else from src, and declares Results, Cancel, Groups and
// ResultHistory. Without a
// store Results and Cancel are Unsupported, with why in the Fallback text
// and in the errors of the ResultStore methods.
func (d *Driver) setResults(client *container.Client, src resultsSource) {
	d.caps.Features[driver.Cancel] = driver.Support{Level: driver.Emulated, Fallback: cancelFallback}
	name := d.cfg.resultsName()
	var err error
	if client == nil && src != nil {
		client, err = src(name)
	}
	if client != nil {
		d.rec.SetRecords("azqueue "+d.name, blobresults.FromClient(client), "")
		d.caps.Features[driver.Results] = driver.Support{Level: driver.Emulated, Fallback: resultsFallback}
		return
	}
	why := "no result container was given: pass Options.Results (a container client) to azqueue.New"
	if err != nil {
		why = "the result container " + name + " cannot be reached: " + err.Error()
	}
	d.rec.SetRecords("azqueue "+d.name, nil, why)
	d.caps.Features[driver.Results] = driver.Support{Level: driver.Unsupported, Fallback: why}
	d.caps.Features[driver.Cancel] = driver.Support{Level: driver.Unsupported, Fallback: "cancel needs result records: " + why}
	d.caps.Features[driver.Groups] = driver.Support{Level: driver.Unsupported, Fallback: "groups are counted from the result records: " + why}
	d.caps.Features[driver.ResultHistory] = driver.Support{Level: driver.Unsupported, Fallback: "the history is added up from the result records: " + why}
	d.caps.Features[driver.Dependencies] = driver.Support{Level: driver.Unsupported, Fallback: "held tasks (dependencies and group steps) are kept in the result container: " + why}
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
