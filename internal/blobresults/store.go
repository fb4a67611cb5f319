// Package blobresults keeps jobq result records as blobs in an Azure Blob
// Storage container, for the Azure backends whose engines have no place
// for them (Storage Queue, Service Bus). The backends implement
// driver.ResultStore by forwarding to a Store.
//
// Each record is the block blob named after its task ID (blobName), whose
// body is a small JSON document and whose metadata carries the state and
// the expiry, so that PurgeResults can list expired records without
// reading them. The container is created on the first write that finds it
// missing.
package blobresults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Metadata keys of a record blob.
const (
	metaExpires = "jobqexpires" // expiry, Unix milliseconds
	metaState   = "jobqstate"
)

// parallelism bounds the requests one call has in flight: Blob Storage
// has no multi-blob read or write.
const parallelism = 16

// Purge bounds: one PurgeResults call lists at most purgeListPages pages
// (of up to 5000 blobs each) and deletes at most purgeMax records; the
// next call goes on where it stopped.
const (
	purgeListPages = 2
	purgeMax       = 2000
)

// Store keeps result records in one container. It is safe for concurrent
// use.
type Store struct {
	client *container.Client
	// where names the container in errors (never with credentials).
	where string

	mu      sync.Mutex
	created bool    // the container is known to exist
	marker  *string // where the next purge goes on listing

	owner string    // names this store in its claims of held tasks
	held  heldCache // decoded held messages (ListHeld)
}

// New returns the store in the container client serves. where names it in
// error messages, for example "azblob://ACCOUNT/CONTAINER"; it must hold
// no secret.
func New(client *container.Client, where string) *Store {
	return &Store{client: client, where: where, owner: newOwner()}
}

// Where names the store's container (without credentials).
func (s *Store) Where() string { return s.where }

// safeName is what a task ID may be to name its blob as it is. It does not
// end with a dot: Azure asks to avoid such blob names, as URL handling
// along the way may drop the dot (a record of "a." read as that of "a").
var safeName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9_-])?$`)

// blobName is the blob of task id's record: the ID itself when it is
// short and plain, else "~" and the hex SHA-256 of the ID (a name no plain
// ID can have). The body holds the ID either way.
func blobName(id string) string {
	if safeName.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "~" + hex.EncodeToString(sum[:])
}

// body is a record blob's content.
type body struct {
	Version int                `json:"v"`
	ID      string             `json:"id"`
	State   driver.ResultState `json:"state"`
	Updated time.Time          `json:"updated"`
	Expires time.Time          `json:"expires"`
	Data    json.RawMessage    `json:"data,omitempty"`
	Raw     []byte             `json:"raw,omitempty"` // Data when it is not JSON
}

// expiryOf is r's expiry, or jobq's default retention after it was
// written when it has none, so that no record lives forever.
func expiryOf(r *driver.ResultRecord) time.Time {
	if !r.ExpiresAt.IsZero() {
		return r.ExpiresAt
	}
	at := r.UpdatedAt
	if at.IsZero() {
		at = time.Now()
	}
	return at.Add(driver.DefaultRetention)
}

func encode(r *driver.ResultRecord) ([]byte, map[string]*string, error) {
	b := body{Version: 1, ID: r.ID, State: r.State, Updated: r.UpdatedAt.UTC(), Expires: expiryOf(r).UTC()}
	if json.Valid(r.Data) {
		b.Data = r.Data
	} else {
		b.Raw = r.Data
	}
	data, err := json.Marshal(b)
	if err != nil {
		return nil, nil, err
	}
	meta := map[string]*string{
		metaExpires: to.Ptr(strconv.FormatInt(b.Expires.UnixMilli(), 10)),
		metaState:   to.Ptr(string(r.State)),
	}
	return data, meta, nil
}

func decode(data []byte) (*driver.ResultRecord, error) {
	var b body
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	if b.Version != 1 || b.ID == "" {
		return nil, fmt.Errorf("not a jobq result record (version %d)", b.Version)
	}
	r := &driver.ResultRecord{ID: b.ID, State: b.State, UpdatedAt: b.Updated, ExpiresAt: b.Expires, Data: []byte(b.Data)}
	if b.Raw != nil {
		r.Data = b.Raw
	}
	return r, nil
}

// each runs f for 0..n-1 with at most parallelism at once and returns the
// first error.
func each(ctx context.Context, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, parallelism)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return first
}

// PutResults implements driver.ResultStore. A record replaces its blob,
// but a cancel request is uploaded with If-None-Match: * (create only),
// and replaces only a blob whose record has expired.
func (s *Store) PutResults(ctx context.Context, recs []*driver.ResultRecord) error {
	now := time.Now()
	return each(ctx, len(recs), func(ctx context.Context, i int) error {
		r := recs[i]
		if r == nil || !expiryOf(r).After(now) {
			return nil
		}
		return s.put(ctx, r)
	})
}

func (s *Store) put(ctx context.Context, r *driver.ResultRecord) error {
	data, meta, err := encode(r)
	if err != nil {
		return s.errorf(err, "encode the record of task %q", r.ID)
	}
	var cond *blob.ModifiedAccessConditions
	if r.State == driver.ResultCancelRequested {
		cond = &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}
	}
	for attempt := 0; ; attempt++ {
		err := s.upload(ctx, blobName(r.ID), "application/json", data, meta, cond)
		switch {
		case err == nil:
			return nil
		case attempt == 0 && bloberror.HasCode(err, bloberror.ContainerNotFound):
			if err := s.create(ctx); err != nil {
				return err
			}
			continue
		case cond != nil && cond.IfNoneMatch != nil && bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
			// A record exists: the request may replace it only if it
			// expired, and only that version of it.
			props, perr := s.client.NewBlobClient(blobName(r.ID)).GetProperties(ctx, nil)
			if bloberror.HasCode(perr, bloberror.BlobNotFound) {
				continue // deleted meanwhile: create it
			}
			if perr != nil {
				return s.errorf(perr, "read the record of task %q", r.ID)
			}
			if !expired(props.Metadata, time.Now()) || props.ETag == nil || attempt > 2 {
				return nil
			}
			cond = &blob.ModifiedAccessConditions{IfMatch: props.ETag}
		case cond != nil && cond.IfMatch != nil && bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobNotFound):
			// Written or purged since: try create-only again.
			cond = &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}
			if attempt > 2 {
				return nil
			}
		default:
			return s.errorf(err, "write the record of task %q", r.ID)
		}
	}
}

// upload writes data as block blob name with its content type and
// metadata, under cond when it is not nil.
func (s *Store) upload(ctx context.Context, name, contentType string, data []byte, meta map[string]*string, cond *blob.ModifiedAccessConditions) error {
	opts := &blockblob.UploadOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr(contentType)},
		Metadata:    meta,
	}
	if cond != nil {
		opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: cond}
	}
	_, err := s.client.NewBlockBlobClient(name).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), opts)
	return err
}

// putBlob uploads data as block blob name (unconditionally), creating the
// container when it is missing. what names the write in errors.
func (s *Store) putBlob(ctx context.Context, name, contentType string, data []byte, meta map[string]*string, what string) error {
	for attempt := 0; ; attempt++ {
		err := s.upload(ctx, name, contentType, data, meta, nil)
		switch {
		case err == nil:
			return nil
		case attempt == 0 && bloberror.HasCode(err, bloberror.ContainerNotFound):
			if err := s.create(ctx); err != nil {
				return err
			}
		default:
			return s.errorf(err, "%s", what)
		}
	}
}

// create creates the container (once per Store; another process may have
// created it first).
func (s *Store) create(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.created {
		return nil
	}
	_, err := s.client.Create(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return s.errorf(err, "create the container for result records")
	}
	s.created = true
	return nil
}

// eachBlob calls f with every listed blob that has a name, page by page.
// It reports false, and calls f no more, when the container does not
// exist. what names the listing in errors.
func (s *Store) eachBlob(ctx context.Context, opts *container.ListBlobsFlatOptions, what string, f func(b *container.BlobItem) error) (bool, error) {
	pager := s.client.NewListBlobsFlatPager(opts)
	for pager.More() {
		resp, err := pager.NextPage(ctx)
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return false, nil
		}
		if err != nil {
			return false, s.errorf(err, "%s", what)
		}
		for _, b := range resp.Segment.BlobItems {
			if b.Name == nil {
				continue
			}
			if err := f(b); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// expired reports whether a record blob's metadata says it expired before
// t (a blob without the entry did not).
func expired(meta map[string]*string, t time.Time) bool {
	for k, v := range meta {
		if v == nil || !strings.EqualFold(k, metaExpires) {
			continue
		}
		ms, err := strconv.ParseInt(*v, 10, 64)
		return err == nil && !time.UnixMilli(ms).After(t)
	}
	return false
}

// GetResults implements driver.ResultStore: one download per ID.
func (s *Store) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	out := make([]*driver.ResultRecord, len(ids))
	t := time.Now()
	err := each(ctx, len(ids), func(ctx context.Context, i int) error {
		resp, err := s.client.NewBlobClient(blobName(ids[i])).DownloadStream(ctx, nil)
		switch {
		case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound):
			return nil
		case err != nil:
			return s.errorf(err, "read the record of task %q", ids[i])
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			return s.errorf(err, "read the record of task %q", ids[i])
		}
		r, err := decode(buf.Bytes())
		if err != nil || r.ID != ids[i] {
			return nil // not a record of this task (another tool's blob)
		}
		if r.ExpiresAt.After(t) {
			out[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PurgeResults implements driver.ResultStore: it lists up to
// purgeListPages pages of the container with their metadata and deletes
// the records that expired before now, at most purgeMax; the next call
// goes on listing where this one stopped, wrapping around at the end. A
// delete is conditional on the listed version, so a record rewritten
// meanwhile stays.
func (s *Store) PurgeResults(ctx context.Context, now time.Time) (int64, error) {
	s.mu.Lock()
	marker := s.marker
	s.mu.Unlock()
	type victim struct {
		name string
		etag *azcore.ETag
	}
	var victims []victim
	pager := s.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Metadata: true}, Marker: marker})
	for page := 0; page < purgeListPages && pager.More() && len(victims) < purgeMax; page++ {
		resp, err := pager.NextPage(ctx)
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, s.errorf(err, "list result records")
		}
		for _, b := range resp.Segment.BlobItems {
			if b.Name != nil && b.Properties != nil && expired(b.Metadata, now) && len(victims) < purgeMax {
				victims = append(victims, victim{*b.Name, b.Properties.ETag})
			}
		}
		marker = resp.NextMarker
		if marker != nil && *marker == "" {
			marker = nil
		}
		if marker == nil {
			break
		}
	}
	s.mu.Lock()
	s.marker = marker
	s.mu.Unlock()
	var n int64
	var mu sync.Mutex
	err := each(ctx, len(victims), func(ctx context.Context, i int) error {
		var opts *blob.DeleteOptions
		if v := victims[i]; v.etag != nil {
			opts = &blob.DeleteOptions{AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: v.etag}}}
		}
		_, err := s.client.NewBlobClient(victims[i].name).Delete(ctx, opts)
		switch {
		case err == nil:
			mu.Lock()
			n++
			mu.Unlock()
			return nil
		case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ConditionNotMet):
			return nil // deleted or rewritten meanwhile
		default:
			return s.errorf(err, "delete the expired record %s", victims[i].name)
		}
	})
	return n, err
}

// errorf classifies a Blob Storage error for the portable layer; the SDK
// has retried what it could by then.
func (s *Store) errorf(err error, format string, args ...any) error {
	code := errcode.Unavailable
	var re *azcore.ResponseError
	var af *azidentity.AuthenticationFailedError
	hint := ""
	switch {
	case errors.As(err, &re):
		switch re.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			code = errcode.PermissionDenied
			hint = " (the identity needs the \"Storage Blob Data Contributor\" role on the container, or the key or SAS must allow read, write, create, delete and list)"
		case http.StatusBadRequest:
			code = errcode.InvalidArgument
		case http.StatusNotFound:
			code = errcode.NotFound
		}
	case errors.As(err, &af):
		code = errcode.PermissionDenied
		hint = " (Entra ID refused the credentials: sign in again with `az login`, or check the managed identity)"
	}
	if c := errcode.Of(err); c == errcode.Canceled || c == errcode.DeadlineExceeded {
		code = c
	}
	detail := err.Error()
	if re != nil {
		// The SDK's own text spans many lines (request, headers, XML body).
		detail = fmt.Sprintf("HTTP %d %s", re.StatusCode, re.ErrorCode)
	}
	return &driver.Error{Code: code, Err: err,
		Msg: fmt.Sprintf("result records in %s: %s%s: %s", s.where, fmt.Sprintf(format, args...), hint, detail)}
}
