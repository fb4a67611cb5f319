package gcs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"

	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/conformance"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
	"github.com/jobq/jobq/stash/gcs"
	"github.com/jobq/jobq/stash/stashtest"
)

// fakeGCS starts an in-process fake-gcs-server with one bucket.
func fakeGCS(t testing.TB, bucket string) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Writer: ioDiscard{}})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	return srv
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }

// testToken is the bearer token official clients send; errors must not show it.
const testToken = "ya29.secret-token-value"

// official returns a cloud.google.com/go/storage client of the server at
// endpoint (JSON reads: the emulator has no XML API), sending a bearer
// token, retrying as a store's own client does but quickly.
func official(t testing.TB, endpoint string) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(context.Background(), option.WithEndpoint(endpoint+"/storage/v1/"),
		option.WithHTTPClient(&http.Client{Transport: bearer{testToken}}), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	c.SetRetry(storage.WithMaxAttempts(3), storage.WithBackoff(gax.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Multiplier: 2}))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestStore runs the store contract on fake-gcs-server, each store under
// its own prefix of one bucket.
func TestStore(t *testing.T) {
	t.Parallel()
	srv := fakeGCS(t, "bkt")
	client := official(t, srv.URL())
	var n atomic.Int64
	mux := new(stash.URLMux)
	mux.Register(gcs.Scheme, &gcs.URLOpener{Client: client})
	stashtest.Run(t, stashtest.Harness{
		Mux: mux,
		NewStore: func(t testing.TB) stash.Store {
			s, err := gcs.New(client, "bkt", fmt.Sprintf("/jobs/%d/", n.Add(1)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Overwrite: func(t testing.TB, s stash.Store, name string, data []byte) {
			prefix := strings.TrimPrefix(s.Location(), "gs://bkt/")
			srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bkt", Name: prefix + "/" + name}, Content: data})
		},
	})
}

// TestOpenRejects: URLs the store cannot use.
func TestOpenRejects(t *testing.T) {
	t.Parallel()
	_, err := stash.Open(t.Context(), "gs:///prefix")
	expect(t, err, errcode.InvalidArgument, "names no bucket")
	_, err = gcs.New(nil, "bkt", "")
	expect(t, err, errcode.InvalidArgument, "needs a client")
}

// TestOldObjects: objects the earlier JSON API store wrote (a multipart
// upload with content type application/json and sha256 metadata, under
// PREFIX/<sha256>) load through the references it wrote.
func TestOldObjects(t *testing.T) {
	srv := fakeGCS(t, "tasks")
	data := []byte(`{"version": 2, "kwargs": "{}", "num_retries": 0, "id": "old"}`)
	sum := stash.Sum(data)
	srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{
		BucketName: "tasks", Name: "jobq/" + sum, ContentType: "application/json", Metadata: map[string]string{"sha256": sum},
	}, Content: data})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	ref := "gs://tasks/jobq/" + sum // as the old store wrote it into messages
	loc, _, err := stash.Split(ref)
	if err != nil {
		t.Fatal(err)
	}
	s, err := stash.Open(t.Context(), loc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := stash.Load(t.Context(), s, ref, sum, int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Load of an object the old store wrote = %q, %v", got, err)
	}
	if err := s.Delete(t.Context(), sum); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.GetObject("tasks", "jobq/"+sum); err == nil {
		t.Error("the object is still there after Delete")
	}
	// The new store writes the same way: same name, type and metadata.
	obj, err := s.Put(t.Context(), data)
	if err != nil || obj.URL != ref {
		t.Fatalf("Put = %+v, %v; want URL %s", obj, err, ref)
	}
	o, err := srv.GetObject("tasks", "jobq/"+sum)
	if err != nil || o.ContentType != "application/json" || o.Metadata["sha256"] != sum {
		t.Errorf("object written: %+v, %v; want content type application/json and sha256 metadata", o.ObjectAttrs, err)
	}
}

func expect(t *testing.T, err error, code errcode.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Errorf("got no error, want %v saying %q", code, msg)
		return
	}
	if got := errcode.Of(err); got != code || !strings.Contains(err.Error(), msg) {
		t.Errorf("error %v (code %v), want code %v saying %q", err, got, code, msg)
	}
}

func BenchmarkStore(b *testing.B) {
	srv := fakeGCS(b, "bkt")
	s, err := gcs.New(official(b, srv.URL()), "bkt", "bench")
	if err != nil {
		b.Fatal(err)
	}
	stashtest.Benchmark(b, s)
}

// TestOpenGCSEmulatorHost opens gs:// by URL alone, reaching the emulator
// through STORAGE_EMULATOR_HOST as users of fake-gcs-server would: a bare
// host:port (as the official clients take it) or a full URL.
func TestOpenGCSEmulatorHost(t *testing.T) {
	srv := fakeGCS(t, "emu")
	for _, host := range []string{strings.TrimPrefix(srv.URL(), "http://"), srv.URL()} {
		t.Run(host, func(t *testing.T) {
			t.Setenv("STORAGE_EMULATOR_HOST", host)
			s, err := stash.Open(context.Background(), "gs://emu/prefix")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Location() != "gs://emu/prefix" {
				t.Errorf("Location = %s", s.Location())
			}
			obj, err := s.Put(t.Context(), []byte("hello"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := srv.GetObject("emu", "prefix/"+obj.SHA256); err != nil {
				t.Errorf("object not where expected: %v", err)
			}
			if got, err := stash.Load(t.Context(), s, obj.URL, obj.SHA256, obj.Size); err != nil || string(got) != "hello" {
				t.Errorf("Load = %q, %v", got, err)
			}
		})
	}
}

// faultFront serves GCS requests in front of srv: each request that fail
// returns true for is answered with status and a JSON API error body; the
// others pass through to the emulator. It counts requests.
func faultFront(t *testing.T, srv *fakestorage.Server, status int, fail func(n int64) bool) (endpoint string, requests *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	requests = new(atomic.Int64)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fail(requests.Add(1)) {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error": {"code": %d, "message": "injected %s"}}`, status, http.StatusText(status))
	}))
	t.Cleanup(front.Close)
	return front.URL, requests
}

// bearer adds a bearer token to every request, as an oauth2 client would.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestGCSErrors checks how failures are classified: the codes decide
// whether a receiver dead-letters a message or leaves it for later.
func TestGCSErrors(t *testing.T) {
	t.Parallel()
	const token = testToken
	srv := fakeGCS(t, "bkt")
	name := stash.Sum([]byte("x"))
	tests := []struct {
		name   string
		status int // injected on every request; 0: none
		op     string
		code   errcode.Code
		msg    string
		tries  int64 // requests expected; 0: not checked
	}{
		{"401 put", http.StatusUnauthorized, "put", errcode.PermissionDenied, "injected Unauthorized", 1},
		{"403 get", http.StatusForbidden, "get", errcode.PermissionDenied, "storage.objects", 1},
		{"403 delete", http.StatusForbidden, "delete", errcode.PermissionDenied, "injected Forbidden", 1},
		{"400 put", http.StatusBadRequest, "put", errcode.InvalidArgument, "injected Bad Request", 1},
		{"503 get is retried", http.StatusServiceUnavailable, "get", errcode.Unavailable, "injected Service Unavailable", 3},
		{"500 put is retried", http.StatusInternalServerError, "put", errcode.Unavailable, "injected Internal Server Error", 3},
		{"429 delete is retried", http.StatusTooManyRequests, "delete", errcode.Unavailable, "injected Too Many Requests", 3},
		{"404 object on get", http.StatusNotFound, "get", errcode.NotFound, "does not exist", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			endpoint, requests := faultFront(t, srv, tc.status, func(int64) bool { return true })
			s, err := gcs.New(official(t, endpoint), "bkt", "p")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			switch tc.op {
			case "put":
				_, err = s.Put(t.Context(), []byte("x"))
			case "get":
				_, err = s.Get(t.Context(), name, -1)
			case "delete":
				err = s.Delete(t.Context(), name)
			}
			expect(t, err, tc.code, tc.msg)
			if err != nil && strings.Contains(err.Error(), token) {
				t.Errorf("error shows the credentials: %v", err)
			}
			if got := requests.Load(); tc.tries != 0 && got != tc.tries {
				t.Errorf("%d requests, want %d", got, tc.tries)
			}
		})
	}

	t.Run("a transient failure is retried to success", func(t *testing.T) {
		t.Parallel()
		endpoint, requests := faultFront(t, srv, http.StatusServiceUnavailable, func(n int64) bool { return n == 1 })
		s, err := gcs.New(official(t, endpoint), "bkt", "p")
		if err != nil {
			t.Fatal(err)
		}
		obj, err := s.Put(t.Context(), []byte("retried"))
		if err != nil {
			t.Fatalf("Put after one 503: %v", err)
		}
		if got, err := stash.Load(t.Context(), s, obj.URL, obj.SHA256, obj.Size); err != nil || string(got) != "retried" {
			t.Errorf("Load = %q, %v", got, err)
		}
		if n := requests.Load(); n != 3 {
			t.Errorf("%d requests, want 3 (failed put, put, get)", n)
		}
	})
	t.Run("missing bucket", func(t *testing.T) {
		t.Parallel()
		s, err := gcs.New(official(t, srv.URL()), "no-such-bucket", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Put(t.Context(), []byte("x"))
		expect(t, err, errcode.NotFound, "bucket no-such-bucket does not exist")
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		front := httptest.NewServer(http.NotFoundHandler())
		front.Close() // nothing listens there now
		s, err := gcs.New(official(t, front.URL), "bkt", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Get(t.Context(), name, -1)
		expect(t, err, errcode.Unavailable, "connect")
	})
	t.Run("context ends", func(t *testing.T) {
		t.Parallel()
		s, err := gcs.New(official(t, srv.URL()), "bkt", "")
		if err != nil {
			t.Fatal(err)
		}
		canceled, cancel := context.WithCancel(t.Context())
		cancel()
		_, err = s.Put(canceled, []byte("x"))
		expect(t, err, errcode.Canceled, "write object")
		expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		_, err = s.Get(expired, name, -1)
		expect(t, err, errcode.DeadlineExceeded, "read object")
	})
}

// TestGCSApplicationDefaultCredentials runs the default path: credentials
// from GOOGLE_APPLICATION_CREDENTIALS, missing or refused by the token
// endpoint (a local one named by the key file).
func TestGCSApplicationDefaultCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	_, err := stash.Open(t.Context(), "gs://bkt/p")
	expect(t, err, errcode.Unavailable, "no Google credentials")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error": "invalid_grant", "error_description": "Invalid JWT Signature."}`)
	}))
	defer tokens.Close()
	sa, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": pemKey,
		"client_email": "jobq@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokens.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(file, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	srv := fakeGCS(t, "bkt")
	s, err := gcs.Open(t.Context(), "bkt", "p", option.WithEndpoint(srv.URL()+"/storage/v1/"), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Put(t.Context(), []byte("x"))
	expect(t, err, errcode.PermissionDenied, "application-default login")
	if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("error shows the key: %v", err)
	}
}

// TestConformance runs the suite's Stash check with this store, on SQLite
// limited to 64 KiB messages, reaching fake-gcs-server by URL as users do.
func TestConformance(t *testing.T) {
	srv := fakeGCS(t, "tasks")
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	var n atomic.Int64
	conformance.RunStash(t, conformance.Harness{Name: "sqlite", NewQueueURL: func(t testing.TB) string {
		return "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=big&max_message_bytes=65536"
	}}, conformance.StashHarness{Name: "gcs", NewStashURL: func(testing.TB) string {
		return fmt.Sprintf("gs://tasks/conformance/%d", n.Add(1))
	}})
}

// The Google libraries probe the GCE metadata server (169.254.169.254 and a
// DNS lookup of metadata.google.internal) while looking for credentials;
// the tests point every such probe at a closed loopback port instead.
func init() {
	os.Setenv("GCE_METADATA_HOST", "127.0.0.1:1")
	os.Setenv("NO_GCE_CHECK", "True")
}
