package stash

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/jobq/jobq/driver"
)

// The gs:// store speaks the Cloud Storage JSON API over net/http rather
// than through cloud.google.com/go/storage: that client links gRPC and
// OpenTelemetry into every binary that imports jobq, nearly doubling the
// jobq binary and an idle worker's memory (figures in docs/stash.md), for
// three requests this store needs: a create-only upload, a ranged read and
// a delete.

// DefaultGCSEndpoint is the Cloud Storage JSON API's root URL.
const DefaultGCSEndpoint = "https://storage.googleapis.com"

// gcsScope is the OAuth scope the store asks application default
// credentials for: read, create and delete objects.
const gcsScope = "https://www.googleapis.com/auth/devstorage.read_write"

// gcsAttempts is how many times a request that failed transiently (network,
// 429, 5xx) is sent. Every request is safe to repeat: uploads are
// create-only, reads have no effect, and deleting a deleted object succeeds.
const gcsAttempts = 3

// gcsBackoff is the pause before the second attempt; it doubles after.
const gcsBackoff = 200 * time.Millisecond

// maxErrorBody bounds how much of an error response is read for its message.
const maxErrorBody = 64 << 10

// GCSOptions configures OpenGCS. The zero value reaches Cloud Storage with
// application default credentials, or the emulator at STORAGE_EMULATOR_HOST
// when that is set.
type GCSOptions struct {
	// Endpoint is the JSON API's root URL, without /storage/v1. Default:
	// http://$STORAGE_EMULATOR_HOST when that is set (a full URL there is
	// used as is), else DefaultGCSEndpoint.
	Endpoint string
	// HTTPClient sends the requests and must add credentials itself (from
	// oauth2.NewClient, say); the store does not close it. Default: a
	// client with application default credentials for the devstorage
	// read_write scope, or, with STORAGE_EMULATOR_HOST set, a client
	// without credentials.
	HTTPClient *http.Client
}

// gcsStore keeps objects in a Google Cloud Storage bucket under a prefix.
type gcsStore struct {
	client   *http.Client
	owned    *http.Transport // closed by Close; nil when the caller owns client
	endpoint string          // no trailing slash
	bucket   string
	prefix   string // "" or "dir/sub/"
	loc      string
}

// OpenGCS opens a stash in bucket under prefix. With zero opts it uses
// application default credentials (gcloud auth application-default login, a
// service account, workload identity), or the emulator at
// STORAGE_EMULATOR_HOST when set; see GCSOptions.
func OpenGCS(ctx context.Context, bucket, prefix string, opts GCSOptions) (Store, error) {
	if bucket == "" {
		return nil, driver.Errorf(driver.InvalidArgument, "stash gs://: no bucket named; use gs://bucket/prefix")
	}
	emulator := os.Getenv("STORAGE_EMULATOR_HOST")
	endpoint := opts.Endpoint
	if endpoint == "" {
		switch {
		case strings.Contains(emulator, "://"):
			endpoint = emulator
		case emulator != "":
			endpoint = "http://" + emulator
		default:
			endpoint = DefaultGCSEndpoint
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, driver.Errorf(driver.InvalidArgument, "stash gs://%s: endpoint %q is not an http(s) URL; use e.g. %s", bucket, redactEndpoint(endpoint), DefaultGCSEndpoint)
	}
	s := newGCS(opts.HTTPClient, endpoint, bucket, prefix)
	if s.client != nil {
		return s, nil
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	s.owned = transport
	if emulator != "" {
		s.client = &http.Client{Transport: transport}
		return s, nil
	}
	// The client outlives ctx: it refreshes tokens whenever they expire.
	base := context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, &http.Client{Transport: transport})
	s.client, err = google.DefaultClient(base, gcsScope)
	if err != nil {
		return nil, wrap(driver.Unavailable, err, "stash %s: no Google credentials (set up application default credentials: gcloud auth application-default login, or GOOGLE_APPLICATION_CREDENTIALS naming a service account key)", s.loc)
	}
	return s, nil
}

// NewGCS returns a stash in bucket under prefix whose requests client sends;
// client must add credentials (see GCSOptions.HTTPClient) and the caller
// keeps and closes it. The endpoint is as for OpenGCS.
func NewGCS(client *http.Client, bucket, prefix string) (Store, error) {
	if client == nil {
		return nil, driver.Errorf(driver.InvalidArgument, "stash gs://%s: NewGCS needs an HTTP client; use OpenGCS for application default credentials", bucket)
	}
	return OpenGCS(context.Background(), bucket, prefix, GCSOptions{HTTPClient: client})
}

func newGCS(client *http.Client, endpoint, bucket, prefix string) *gcsStore {
	endpoint = strings.TrimSuffix(strings.TrimRight(endpoint, "/"), "/storage/v1")
	prefix = strings.Trim(prefix, "/")
	loc := "gs://" + bucket
	if prefix != "" {
		loc += "/" + prefix
		prefix += "/"
	}
	return &gcsStore{client: client, endpoint: endpoint, bucket: bucket, prefix: prefix, loc: loc}
}

func (s *gcsStore) Location() string { return s.loc }

func (s *gcsStore) Close() error {
	if s.owned != nil {
		s.owned.CloseIdleConnections()
	}
	return nil
}

// objectURL is the JSON API URL of the object named name (under the prefix).
func (s *gcsStore) objectURL(name string, query url.Values) string {
	return s.endpoint + "/storage/v1/b/" + escapeSegment(s.bucket) + "/o/" + escapeSegment(s.prefix+name) + "?" + query.Encode()
}

func (s *gcsStore) Put(ctx context.Context, data []byte) (Object, error) {
	name := Sum(data)
	obj := Object{URL: s.loc + "/" + name, SHA256: name, Size: int64(len(data))}
	// One multipart request carries the object's metadata and bytes (a
	// media upload cannot set metadata). ifGenerationMatch=0 makes it
	// create-only: it fails with 412 when the object exists, which for a
	// content-addressed name means the same bytes are already there.
	meta, err := json.Marshal(map[string]any{
		"name":        s.prefix + name,
		"contentType": "application/json",
		"metadata":    map[string]string{"sha256": name},
	})
	if err != nil {
		return Object{}, fmt.Errorf("stash %s: encode object metadata: %w", s.loc, err)
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	boundary := hex.EncodeToString(rnd[:])
	head := []byte("--" + boundary + "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n" + string(meta) +
		"\r\n--" + boundary + "\r\nContent-Type: application/json\r\n\r\n")
	tail := []byte("\r\n--" + boundary + "--\r\n")
	target := s.endpoint + "/upload/storage/v1/b/" + escapeSegment(s.bucket) + "/o?" +
		url.Values{"uploadType": {"multipart"}, "ifGenerationMatch": {"0"}}.Encode()

	resp, err := s.do(ctx, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target,
			io.MultiReader(bytes.NewReader(head), bytes.NewReader(data), bytes.NewReader(tail)))
		if err != nil {
			return nil, err
		}
		req.ContentLength = int64(len(head) + len(data) + len(tail))
		req.Header.Set("Content-Type", "multipart/related; boundary="+boundary)
		return req, nil
	})
	if err != nil {
		return Object{}, s.errorf(err, "write object %s", name)
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		return obj, nil
	case resp.StatusCode == http.StatusPreconditionFailed:
		return obj, nil // already there
	case resp.StatusCode == http.StatusNotFound:
		return Object{}, s.errorf(readAPIError(resp), "bucket %s does not exist (create it, or fix the stash URL)", s.bucket)
	default:
		return Object{}, s.errorf(readAPIError(resp), "write object %s", name)
	}
}

func (s *gcsStore) Get(ctx context.Context, name string, limit int64) ([]byte, error) {
	if !IsName(name) {
		return nil, driver.Errorf(driver.InvalidArgument, "stash object name %q is not a SHA-256 digest", name)
	}
	target := s.objectURL(name, url.Values{"alt": {"media"}})
	resp, err := s.do(ctx, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return nil, err
		}
		if limit > 0 {
			req.Header.Set("Range", "bytes=0-"+strconv.FormatInt(limit-1, 10))
		}
		return req, nil
	})
	if err != nil {
		return nil, s.errorf(err, "read object %s", name)
	}
	defer drain(resp)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusPartialContent:
	case http.StatusRequestedRangeNotSatisfiable:
		return []byte{}, nil // an empty object: no byte 0 to start at
	case http.StatusNotFound:
		return nil, notFound(s.loc, name, readAPIError(resp))
	default:
		return nil, s.errorf(readAPIError(resp), "read object %s", name)
	}
	data, err := readLimited(resp.Body, limit)
	if err != nil {
		return nil, s.errorf(err, "read object %s", name)
	}
	return data, nil
}

func (s *gcsStore) Delete(ctx context.Context, name string) error {
	if !IsName(name) {
		return driver.Errorf(driver.InvalidArgument, "stash object name %q is not a SHA-256 digest", name)
	}
	target := s.objectURL(name, nil)
	resp, err := s.do(ctx, func() (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodDelete, target, nil)
	})
	if err != nil {
		return s.errorf(err, "delete object %s", name)
	}
	defer drain(resp)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNoContent, http.StatusNotFound:
		return nil
	default:
		return s.errorf(readAPIError(resp), "delete object %s", name)
	}
}

// do sends the request newReq builds, again after a network error, 429 or
// 5xx, up to gcsAttempts times. The last response is returned whatever its
// status; the caller closes it.
func (s *gcsStore) do(ctx context.Context, newReq func() (*http.Request, error)) (*http.Response, error) {
	pause := gcsBackoff
	for attempt := 1; ; attempt++ {
		req, err := newReq()
		if err != nil {
			return nil, err
		}
		resp, err := s.client.Do(req)
		if attempt == gcsAttempts || ctx.Err() != nil || refused(err) ||
			(err == nil && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500) {
			return resp, err
		}
		if err == nil {
			drain(resp)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		pause *= 2
	}
}

// apiError is an error response from the JSON API.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string {
	msg := "HTTP " + strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		msg += " " + t
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// readAPIError reads an error response: {"error": {"code", "message"}}, or
// for a proxy's plain-text page, its first line.
func readAPIError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &apiError{Status: resp.StatusCode}
	var parsed struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &parsed) == nil && parsed.Error.Message != "" {
		e.Message = parsed.Error.Message
	} else {
		line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		if len(line) > 200 {
			line = line[:200] + "..."
		}
		e.Message = line
	}
	return e
}

// errorf classifies a Cloud Storage error.
func (s *gcsStore) errorf(err error, format string, args ...any) error {
	code := driver.Unavailable // network, 429, 5xx
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		switch ae.Status {
		case http.StatusNotFound:
			code = driver.NotFound // the bucket
		case http.StatusUnauthorized, http.StatusForbidden:
			code = driver.PermissionDenied
			format += " (check that the credentials may use the bucket: producers need storage.objects.create and .get, workers .get and .delete)"
		case http.StatusBadRequest:
			code = driver.InvalidArgument
		}
	case refused(err):
		code = driver.PermissionDenied
		format += " (the token endpoint refused the credentials: renew them with gcloud auth application-default login, or check GOOGLE_APPLICATION_CREDENTIALS)"
	}
	if c := driver.CodeOf(err); c == driver.Canceled || c == driver.DeadlineExceeded {
		code = c
	}
	return wrap(code, err, "stash "+s.loc+": "+format, args...)
}

// refused reports whether err is the token endpoint refusing the
// credentials, which trying again does not change.
func refused(err error) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500
}

// drain reads a little of what is left of resp's body, so that the
// connection can be reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
}

// escapeSegment percent-encodes s as one URL path segment: everything but
// RFC 3986's unreserved characters, "/" included, as object names require.
func escapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// redactEndpoint hides a password in an endpoint URL for error messages.
func redactEndpoint(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil && u.User != nil {
		return u.Redacted()
	}
	return endpoint
}
