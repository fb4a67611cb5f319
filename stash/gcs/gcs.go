// Package gcs is the jobq stash store on Google Cloud Storage, through
// Google's client (cloud.google.com/go/storage). Importing it registers the
// scheme "gs" on stash.DefaultURLMux:
//
//	import _ "github.com/jobq/jobq/stash/gcs"
//
//	gs://BUCKET[/PREFIX]
//
// Objects are named PREFIX/<sha256>, written create-only with content type
// application/json and a sha256 metadata entry.
//
// # Credentials
//
// A URL is opened with URLOpener.Client when set, else with a client of its
// own using application default credentials (gcloud auth
// application-default login, GOOGLE_APPLICATION_CREDENTIALS, a service
// account or workload identity). STORAGE_EMULATOR_HOST (host:port or a
// URL) points that client at an emulator such as fake-gcs-server, without
// credentials. Programs that hold a client call New instead.
package gcs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
)

// Scheme is the URL scheme this package registers.
const Scheme = "gs"

// Retries: three attempts, 0.2 s and then about 0.4 s apart, for uploads
// always and for reads and deletes on a client the store creates itself
// (a client passed to New keeps its own settings). Every request the store
// sends is safe to repeat: uploads are create-only, reads have no effect,
// and deleting a deleted object succeeds.
const (
	attempts = 3
	backoff  = 200 * time.Millisecond
)

// maxChunk bounds the upload buffer: bodies below it go in one request.
const maxChunk = 16 << 20

// DefaultOpener is the opener registered for gs://. Programs may set its
// Client before opening stores.
var DefaultOpener = &URLOpener{}

func init() { stash.Register(Scheme, DefaultOpener) }

// URLOpener opens gs://bucket/prefix URLs.
type URLOpener struct {
	// Client, when set, serves every bucket and is not closed by the
	// stores. When nil, each store creates a client with application
	// default credentials (or for STORAGE_EMULATOR_HOST) and closes it on
	// Close.
	Client *storage.Client
}

// OpenStoreURL opens the store u names.
func (o *URLOpener) OpenStoreURL(ctx context.Context, u *url.URL) (stash.Store, error) {
	if u.Host == "" {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash URL %q names no bucket; use gs://bucket/prefix", u.Redacted())
	}
	if o.Client != nil {
		return New(o.Client, u.Host, u.Path)
	}
	return Open(ctx, u.Host, u.Path)
}

// Open opens a store in bucket under prefix with a client of its own: for
// the emulator at STORAGE_EMULATOR_HOST when that is set, else with
// application default credentials; opts are passed on to storage.NewClient
// after those defaults (option.WithCredentialsFile, say). Close closes the
// client.
func Open(ctx context.Context, bucket, prefix string, opts ...option.ClientOption) (stash.Store, error) {
	if bucket == "" {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash gs://: no bucket named; use gs://bucket/prefix")
	}
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" {
		// The emulators speak only the JSON API; the client reads with
		// the XML API by default.
		opts = append([]option.ClientOption{storage.WithJSONReads()}, opts...)
	}
	// The client outlives ctx: it refreshes tokens whenever they expire.
	client, err := storage.NewClient(context.WithoutCancel(ctx), opts...)
	if err != nil {
		s := newStore(nil, bucket, prefix)
		return nil, stash.WrapError(errcode.Unavailable, err, "stash %s: no Google credentials (set up application default credentials: gcloud auth application-default login, or GOOGLE_APPLICATION_CREDENTIALS naming a service account key)", s.loc)
	}
	client.SetRetry(storage.WithBackoff(gax.Backoff{Initial: backoff, Max: 2 * time.Second, Multiplier: 2}), storage.WithMaxAttempts(attempts))
	s := newStore(client, bucket, prefix)
	s.owned = true
	return s, nil
}

// New returns a store in bucket under prefix that uses client, which the
// caller keeps and closes (Close leaves it open). The client's retry
// settings apply; the store marks its requests as safe to retry.
func New(client *storage.Client, bucket, prefix string) (stash.Store, error) {
	if client == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash gs://%s: New needs a client; use Open for application default credentials", bucket)
	}
	if bucket == "" {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash gs://: no bucket named; use gs://bucket/prefix")
	}
	return newStore(client, bucket, prefix), nil
}

// store keeps objects in a bucket under a prefix.
type store struct {
	client *storage.Client
	owned  bool // Close closes client
	bucket string
	prefix string // "" or "dir/sub/"
	loc    string
}

func newStore(client *storage.Client, bucket, prefix string) *store {
	prefix = strings.Trim(prefix, "/")
	loc := "gs://" + bucket
	if prefix != "" {
		loc += "/" + prefix
		prefix += "/"
	}
	return &store{client: client, bucket: bucket, prefix: prefix, loc: loc}
}

func (s *store) Location() string { return s.loc }

func (s *store) Close() error {
	if s.owned {
		return s.client.Close()
	}
	return nil
}

// object is the handle of the object named name, its requests marked as
// safe to retry (see attempts).
func (s *store) object(name string) *storage.ObjectHandle {
	return s.client.Bucket(s.bucket).Object(s.prefix + name).Retryer(storage.WithPolicy(storage.RetryAlways))
}

func (s *store) Put(ctx context.Context, data []byte) (stash.Object, error) {
	name := stash.Sum(data)
	obj := stash.Object{URL: s.loc + "/" + name, SHA256: name, Size: int64(len(data))}
	// The client retries an upload until the context ends, so the store
	// sends each attempt itself: a failing bucket must not hold a push
	// that has no deadline.
	pause := backoff
	for attempt := 1; ; attempt++ {
		err := s.upload(ctx, name, data)
		var ge *googleapi.Error
		switch {
		case err == nil:
			obj.Created = true
			return obj, nil
		case errors.As(err, &ge) && ge.Code == http.StatusPreconditionFailed:
			return obj, nil // already there (perhaps from an earlier attempt)
		case errors.Is(err, storage.ErrBucketNotExist) || (errors.As(err, &ge) && ge.Code == http.StatusNotFound):
			return stash.Object{}, s.errorf(err, "bucket %s does not exist (create it, or fix the stash URL)", s.bucket)
		case attempt == attempts || ctx.Err() != nil || !storage.ShouldRetry(err):
			return stash.Object{}, s.errorf(err, "write object %s", name)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return stash.Object{}, s.errorf(ctx.Err(), "write object %s", name)
		case <-t.C:
		}
		pause *= 2
	}
}

// upload makes one attempt at writing data as the object name. Being
// create-only (DoesNotExist), it fails with 412 when the object exists,
// which for a content-addressed name means the same bytes are already
// there.
func (s *store) upload(ctx context.Context, name string, data []byte) error {
	o := s.client.Bucket(s.bucket).Object(s.prefix + name).Retryer(storage.WithPolicy(storage.RetryNever))
	w := o.If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
	w.ContentType = "application/json"
	w.Metadata = map[string]string{"sha256": name}
	w.ChunkSize = min(len(data)+1, maxChunk) // one request when it fits
	_, err := io.Copy(w, bytes.NewReader(data))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *store) Get(ctx context.Context, name string, limit int64) ([]byte, error) {
	if err := stash.CheckName(name); err != nil {
		return nil, err
	}
	length := int64(-1)
	if limit >= 0 {
		length = limit
	}
	r, err := s.object(name).NewRangeReader(ctx, 0, length)
	var ge *googleapi.Error
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return nil, stash.NotFoundError(s.loc, name, err)
	case errors.As(err, &ge) && ge.Code == http.StatusRequestedRangeNotSatisfiable:
		return []byte{}, nil // an empty object: no byte 0 to start at
	case err != nil:
		return nil, s.errorf(err, "read object %s", name)
	}
	defer r.Close()
	data, err := stash.ReadLimited(r, limit)
	if err != nil {
		return nil, s.errorf(err, "read object %s", name)
	}
	return data, nil
}

func (s *store) Delete(ctx context.Context, name string) error {
	if err := stash.CheckName(name); err != nil {
		return err
	}
	err := s.object(name).Delete(ctx)
	if err == nil || errors.Is(err, storage.ErrObjectNotExist) {
		return nil
	}
	return s.errorf(err, "delete object %s", name)
}

// errorf classifies a Cloud Storage error: the code decides whether a
// receiver dead-letters a message (NotFound, InvalidArgument) or leaves it
// for later (the others).
func (s *store) errorf(err error, format string, args ...any) error {
	code := errcode.Unavailable // network, 429, 5xx
	var ge *googleapi.Error
	switch {
	case errors.As(err, &ge):
		switch ge.Code {
		case http.StatusNotFound:
			code = errcode.NotFound // the bucket
		case http.StatusUnauthorized, http.StatusForbidden:
			code = errcode.PermissionDenied
			format += " (check that the credentials may use the bucket: producers need storage.objects.create and .get, workers .get and .delete)"
		case http.StatusBadRequest:
			code = errcode.InvalidArgument
		}
	case refused(err):
		code = errcode.PermissionDenied
		format += " (the token endpoint refused the credentials: renew them with gcloud auth application-default login, or check GOOGLE_APPLICATION_CREDENTIALS)"
	}
	if c := errcode.Of(err); c == errcode.Canceled || c == errcode.DeadlineExceeded {
		code = c
	}
	return stash.WrapError(code, err, "stash "+s.loc+": "+format, args...)
}

// refused reports whether err is the token endpoint refusing the
// credentials, which trying again does not change.
func refused(err error) bool {
	var ae *auth.Error
	return errors.As(err, &ae) && ae.Response != nil && ae.Response.StatusCode < 500
}

// Replace writes data as the object name; Cloud Storage makes a new
// object generation visible only once its upload is complete.
func (s *store) Replace(ctx context.Context, name string, data []byte) error {
	if err := stash.CheckName(name); err != nil {
		return err
	}
	w := s.client.Bucket(s.bucket).Object(s.prefix + name).Retryer(storage.WithPolicy(storage.RetryAlways)).NewWriter(ctx)
	w.ContentType = "application/json"
	w.ChunkSize = min(len(data)+1, maxChunk)
	_, err := io.Copy(w, bytes.NewReader(data))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return s.errorf(err, "replace object %s", name)
	}
	return nil
}
