package stash

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/jobq/jobq/driver"
)

// gcsStore keeps objects in a Google Cloud Storage bucket under a prefix.
type gcsStore struct {
	client *storage.Client
	owned  bool // Close closes client
	bucket *storage.BucketHandle
	name   string
	prefix string // "" or "dir/sub/"
	loc    string
}

// OpenGCS opens a stash in bucket under prefix with a new client: application
// default credentials, or the emulator at STORAGE_EMULATOR_HOST when set.
// opts are passed to storage.NewClient (an endpoint or credentials, say);
// with an endpoint override include storage.WithJSONReads(), since
// emulators do not serve the XML read API.
func OpenGCS(ctx context.Context, bucket, prefix string, opts ...option.ClientOption) (Store, error) {
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" {
		opts = append([]option.ClientOption{storage.WithJSONReads()}, opts...)
	}
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, wrap(driver.Unavailable, err, "stash gs://%s: cannot create a Cloud Storage client (are application default credentials set up? try gcloud auth application-default login)", bucket)
	}
	s := NewGCS(c, bucket, prefix).(*gcsStore)
	s.owned = true
	return s, nil
}

// NewGCS returns a stash in bucket under prefix that uses client, which the
// caller keeps and closes.
func NewGCS(client *storage.Client, bucket, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	loc := "gs://" + bucket
	if prefix != "" {
		loc += "/" + prefix
		prefix += "/"
	}
	return &gcsStore{client: client, bucket: client.Bucket(bucket), name: bucket, prefix: prefix, loc: loc}
}

func (s *gcsStore) Location() string { return s.loc }

func (s *gcsStore) Close() error {
	if s.owned {
		return s.client.Close()
	}
	return nil
}

func (s *gcsStore) Put(ctx context.Context, data []byte) (Object, error) {
	name := Sum(data)
	obj := Object{URL: s.loc + "/" + name, SHA256: name, Size: int64(len(data))}
	// Create-only: the precondition fails when the object exists, which for
	// a content-addressed name means the same bytes are already there.
	w := s.bucket.Object(s.prefix + name).If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
	w.ContentType = "application/json"
	w.Metadata = map[string]string{"sha256": name}
	w.ChunkSize = 0 // one request: bodies are already in memory
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		if !isPreconditionFailed(err) {
			return Object{}, s.errorf(err, "write object %s", name)
		}
		return obj, nil
	}
	if err := w.Close(); err != nil && !isPreconditionFailed(err) {
		return Object{}, s.errorf(err, "write object %s", name)
	}
	return obj, nil
}

func (s *gcsStore) Get(ctx context.Context, name string, limit int64) ([]byte, error) {
	if !IsName(name) {
		return nil, driver.Errorf(driver.InvalidArgument, "stash object name %q is not a SHA-256 digest", name)
	}
	length := int64(-1)
	if limit >= 0 {
		length = limit
	}
	r, err := s.bucket.Object(s.prefix+name).NewRangeReader(ctx, 0, length)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, notFound(s.loc, name, err)
	}
	if err != nil {
		return nil, s.errorf(err, "read object %s", name)
	}
	defer r.Close()
	data, err := readLimited(r, limit)
	if err != nil {
		return nil, s.errorf(err, "read object %s", name)
	}
	return data, nil
}

func (s *gcsStore) Delete(ctx context.Context, name string) error {
	if !IsName(name) {
		return driver.Errorf(driver.InvalidArgument, "stash object name %q is not a SHA-256 digest", name)
	}
	err := s.bucket.Object(s.prefix + name).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return s.errorf(err, "delete object %s", name)
	}
	return nil
}

// errorf classifies a Cloud Storage error.
func (s *gcsStore) errorf(err error, format string, args ...any) error {
	code := driver.Unavailable
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch ge.Code {
		case http.StatusNotFound:
			code = driver.NotFound // the bucket
		case http.StatusUnauthorized, http.StatusForbidden:
			code = driver.PermissionDenied
		case http.StatusBadRequest:
			code = driver.InvalidArgument
		}
	}
	if c := driver.CodeOf(err); c == driver.Canceled || c == driver.DeadlineExceeded {
		code = c
	}
	return wrap(code, err, "stash "+s.loc+": "+format, args...)
}

func isPreconditionFailed(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusPreconditionFailed
}
