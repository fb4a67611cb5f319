package stash_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/stash"
)

// testBundle is one store under test plus a way to overwrite an object
// behind its back (to simulate tampering or a different writer).
type testBundle struct {
	store     stash.Store
	overwrite func(t testing.TB, name string, data []byte)
}

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

func setups() map[string]func(t testing.TB) testBundle {
	return map[string]func(t testing.TB) testBundle{
		"file": func(t testing.TB) testBundle {
			dir := t.TempDir()
			s, err := stash.Open(context.Background(), "file://"+filepath.ToSlash(dir)+"/objects")
			if err != nil {
				t.Fatal(err)
			}
			return testBundle{store: s, overwrite: func(t testing.TB, name string, data []byte) {
				if err := os.WriteFile(filepath.Join(dir, "objects", name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}}
		},
		"gcs": func(t testing.TB) testBundle {
			srv := fakeGCS(t, "bkt")
			s, err := stash.OpenGCS(context.Background(), "bkt", "/jobs/big/",
				stash.GCSOptions{Endpoint: srv.URL(), HTTPClient: srv.HTTPClient()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return testBundle{store: s, overwrite: func(t testing.TB, name string, data []byte) {
				srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bkt", Name: "jobs/big/" + name}, Content: data})
			}}
		},
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	for kind, setup := range setups() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				name string
				run  func(t *testing.T, b testBundle)
			}{
				{"put get load", func(t *testing.T, b testBundle) {
					data := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB
					obj, err := b.store.Put(ctx(t), data)
					if err != nil {
						t.Fatal(err)
					}
					if obj.SHA256 != stash.Sum(data) || obj.Size != int64(len(data)) || obj.URL != b.store.Location()+"/"+obj.SHA256 {
						t.Fatalf("Put = %+v, want name %s size %d under %s", obj, stash.Sum(data), len(data), b.store.Location())
					}
					got, err := stash.Load(ctx(t), b.store, obj.URL, obj.SHA256, obj.Size)
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("Load: %d bytes, %v; want the %d bytes put", len(got), err, len(data))
					}
				}},
				{"put is create-only and idempotent", func(t *testing.T, b testBundle) {
					data := []byte(`{"version": 1}`)
					first, err := b.store.Put(ctx(t), data)
					if err != nil {
						t.Fatal(err)
					}
					// The same bytes again, and concurrently: one object, no error.
					var wg sync.WaitGroup
					errs := make(chan error, 8)
					for range 8 {
						wg.Go(func() {
							obj, err := b.store.Put(ctx(t), data)
							if err == nil && obj != first {
								err = fmt.Errorf("second Put = %+v, first %+v", obj, first)
							}
							errs <- err
						})
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						if err != nil {
							t.Error(err)
						}
					}
					// Create-only: an existing object is not replaced.
					b.overwrite(t, first.SHA256, []byte("other"))
					if _, err := b.store.Put(ctx(t), data); err != nil {
						t.Fatal(err)
					}
					got, _ := b.store.Get(ctx(t), first.SHA256, -1)
					if string(got) != "other" {
						t.Errorf("Put replaced an existing object: now %q", got)
					}
				}},
				{"checksum mismatch", func(t *testing.T, b testBundle) {
					obj, err := b.store.Put(ctx(t), []byte("original"))
					if err != nil {
						t.Fatal(err)
					}
					b.overwrite(t, obj.SHA256, []byte("tampered"))
					_, err = stash.Load(ctx(t), b.store, obj.URL, obj.SHA256, obj.Size)
					expect(t, err, driver.InvalidArgument, "SHA-256")
					b.overwrite(t, obj.SHA256, []byte("short"))
					_, err = stash.Load(ctx(t), b.store, obj.URL, obj.SHA256, obj.Size)
					expect(t, err, driver.InvalidArgument, "is 5 bytes")
				}},
				{"missing object", func(t *testing.T, b testBundle) {
					name := stash.Sum([]byte("never stored"))
					_, err := stash.Load(ctx(t), b.store, b.store.Location()+"/"+name, name, 12)
					expect(t, err, driver.NotFound, "does not exist")
				}},
				{"ranged and empty reads", func(t *testing.T, b testBundle) {
					obj, err := b.store.Put(ctx(t), []byte("0123456789"))
					if err != nil {
						t.Fatal(err)
					}
					for _, limit := range []int64{0, 1, 3, 10, 11, -1} {
						want := "0123456789"
						if limit >= 0 && limit < 10 {
							want = want[:limit]
						}
						if got, err := b.store.Get(ctx(t), obj.SHA256, limit); err != nil || string(got) != want {
							t.Errorf("Get limit %d = %q, %v; want %q", limit, got, err, want)
						}
					}
					empty, err := b.store.Put(ctx(t), nil)
					if err != nil {
						t.Fatal(err)
					}
					if got, err := stash.Load(ctx(t), b.store, empty.URL, empty.SHA256, 0); err != nil || len(got) != 0 {
						t.Errorf("Load of an empty object = %q, %v", got, err)
					}
				}},
				{"delete", func(t *testing.T, b testBundle) {
					obj, err := b.store.Put(ctx(t), []byte("to delete"))
					if err != nil {
						t.Fatal(err)
					}
					if err := b.store.Delete(ctx(t), obj.SHA256); err != nil {
						t.Fatal(err)
					}
					_, err = b.store.Get(ctx(t), obj.SHA256, -1)
					expect(t, err, driver.NotFound, "does not exist")
					if err := b.store.Delete(ctx(t), obj.SHA256); err != nil {
						t.Errorf("deleting a missing object: %v, want no error", err)
					}
				}},
				{"names must be digests", func(t *testing.T, b testBundle) {
					_, err := b.store.Get(ctx(t), "../../etc/passwd", -1)
					expect(t, err, driver.InvalidArgument, "not a SHA-256")
					expect(t, b.store.Delete(ctx(t), "x"), driver.InvalidArgument, "not a SHA-256")
					_, err = stash.Load(ctx(t), b.store, b.store.Location()+"/passwd", stash.Sum(nil), 0)
					expect(t, err, driver.InvalidArgument, "does not end in a SHA-256")
					other := stash.Sum([]byte("a"))
					_, err = stash.Load(ctx(t), b.store, b.store.Location()+"/"+other, stash.Sum(nil), 0)
					expect(t, err, driver.InvalidArgument, "carries checksum")
				}},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, setup(t))
				})
			}
		})
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func expect(t *testing.T, err error, code driver.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Errorf("got no error, want %v saying %q", code, msg)
		return
	}
	if got := driver.CodeOf(err); got != code || !strings.Contains(err.Error(), msg) {
		t.Errorf("error %v (code %v), want code %v saying %q", err, got, code, msg)
	}
}

func TestOpenRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, msg string }{
		{"s3://bucket/x", "unknown scheme"},
		{"gs:///prefix", "names no bucket"},
		{"file://otherhost/dir", "three slashes"},
		{"file:///tmp/x?mode=1", "query"},
		{"file://", "no directory"},
		{"%zz", "does not parse"},
	}
	for _, tc := range tests {
		_, err := stash.Open(context.Background(), tc.url)
		expect(t, err, driver.InvalidArgument, tc.msg)
	}
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

// officialGCS is a cloud.google.com/go/storage client of srv (JSON reads:
// the emulator has no XML API).
func officialGCS(t *testing.T, srv *fakestorage.Server) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(t.Context(), option.WithEndpoint(srv.URL()+"/storage/v1/"),
		option.WithoutAuthentication(), storage.WithJSONReads(), option.WithHTTPClient(srv.HTTPClient()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestGCSInteroperability checks the JSON API store against Google's own
// client: each reads what the other wrote, under a prefix that needs
// escaping, with the content type and sha256 metadata the store has always
// set.
func TestGCSInteroperability(t *testing.T) {
	t.Parallel()
	const prefix = "jobs/a b+c%d&e=f;é"
	srv := fakeGCS(t, "bkt")
	s, err := stash.OpenGCS(t.Context(), "bkt", prefix, stash.GCSOptions{Endpoint: srv.URL(), HTTPClient: srv.HTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	official := officialGCS(t, srv)

	t.Run("official client reads the store's object", func(t *testing.T) {
		t.Parallel()
		data := bytes.Repeat([]byte(`{"k": "v"}`), 100_000)
		obj, err := s.Put(t.Context(), data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.GetObject("bkt", prefix+"/"+obj.SHA256); err != nil {
			t.Fatalf("the emulator has no object %s/%s: %v", prefix, obj.SHA256, err)
		}
		handle := official.Bucket("bkt").Object(prefix + "/" + obj.SHA256)
		attrs, err := handle.Attrs(t.Context())
		if err != nil {
			t.Fatalf("official client cannot find %s/%s: %v", prefix, obj.SHA256, err)
		}
		if attrs.ContentType != "application/json" || attrs.Metadata["sha256"] != obj.SHA256 || attrs.Size != obj.Size {
			t.Errorf("attrs: content type %q, metadata %v, size %d; want application/json, sha256=%s, %d",
				attrs.ContentType, attrs.Metadata, attrs.Size, obj.SHA256, obj.Size)
		}
		r, err := handle.NewReader(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var got bytes.Buffer
		if _, err := got.ReadFrom(r); err != nil || !bytes.Equal(got.Bytes(), data) {
			t.Errorf("official client read %d bytes, %v; want the %d put", got.Len(), err, len(data))
		}
	})
	t.Run("store reads the official client's object", func(t *testing.T) {
		t.Parallel()
		data := []byte("written by cloud.google.com/go/storage")
		name := stash.Sum(data)
		w := official.Bucket("bkt").Object(prefix + "/" + name).If(storage.Conditions{DoesNotExist: true}).NewWriter(t.Context())
		w.ContentType = "application/json"
		w.Metadata = map[string]string{"sha256": name}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := stash.Load(t.Context(), s, s.Location()+"/"+name, name, int64(len(data)))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Load = %q, %v", got, err)
		}
		// Putting the same bytes finds the object: the precondition fails.
		if _, err := s.Put(t.Context(), data); err != nil {
			t.Errorf("Put of existing bytes: %v", err)
		}
		if err := s.Delete(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		if _, err := official.Bucket("bkt").Object(prefix + "/" + name).Attrs(t.Context()); !errors.Is(err, storage.ErrObjectNotExist) {
			t.Errorf("after Delete the official client finds: %v", err)
		}
	})
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
	const token = "ya29.secret-token-value"
	client := &http.Client{Transport: bearer{token}}
	srv := fakeGCS(t, "bkt")
	name := stash.Sum([]byte("x"))
	tests := []struct {
		name   string
		status int // injected on every request; 0: none
		op     string
		code   driver.Code
		msg    string
		tries  int64 // requests expected; 0: not checked
	}{
		{"401 put", http.StatusUnauthorized, "put", driver.PermissionDenied, "injected Unauthorized", 1},
		{"403 get", http.StatusForbidden, "get", driver.PermissionDenied, "storage.objects", 1},
		{"403 delete", http.StatusForbidden, "delete", driver.PermissionDenied, "HTTP 403", 1},
		{"400 put", http.StatusBadRequest, "put", driver.InvalidArgument, "injected Bad Request", 1},
		{"503 get is retried", http.StatusServiceUnavailable, "get", driver.Unavailable, "HTTP 503", 3},
		{"500 put is retried", http.StatusInternalServerError, "put", driver.Unavailable, "HTTP 500", 3},
		{"429 delete is retried", http.StatusTooManyRequests, "delete", driver.Unavailable, "HTTP 429", 3},
		{"404 object on get", http.StatusNotFound, "get", driver.NotFound, "does not exist", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			endpoint, requests := faultFront(t, srv, tc.status, func(int64) bool { return true })
			s, err := stash.OpenGCS(t.Context(), "bkt", "p", stash.GCSOptions{Endpoint: endpoint, HTTPClient: client})
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
		s, err := stash.OpenGCS(t.Context(), "bkt", "p", stash.GCSOptions{Endpoint: endpoint, HTTPClient: client})
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
		s, err := stash.OpenGCS(t.Context(), "no-such-bucket", "", stash.GCSOptions{Endpoint: srv.URL(), HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Put(t.Context(), []byte("x"))
		expect(t, err, driver.NotFound, "bucket no-such-bucket does not exist")
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		front := httptest.NewServer(http.NotFoundHandler())
		front.Close() // nothing listens there now
		s, err := stash.OpenGCS(t.Context(), "bkt", "", stash.GCSOptions{Endpoint: front.URL, HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Get(t.Context(), name, -1)
		expect(t, err, driver.Unavailable, "connect")
	})
	t.Run("context ends", func(t *testing.T) {
		t.Parallel()
		s, err := stash.OpenGCS(t.Context(), "bkt", "", stash.GCSOptions{Endpoint: srv.URL(), HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		canceled, cancel := context.WithCancel(t.Context())
		cancel()
		_, err = s.Put(canceled, []byte("x"))
		expect(t, err, driver.Canceled, "write object")
		expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		_, err = s.Get(expired, name, -1)
		expect(t, err, driver.DeadlineExceeded, "read object")
	})
	t.Run("bad endpoint", func(t *testing.T) {
		t.Parallel()
		_, err := stash.OpenGCS(t.Context(), "bkt", "", stash.GCSOptions{Endpoint: "ftp://user:pw@host/"})
		expect(t, err, driver.InvalidArgument, "not an http(s) URL")
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("error shows the password: %v", err)
		}
	})
}

// TestGCSApplicationDefaultCredentials runs the default path: credentials
// from GOOGLE_APPLICATION_CREDENTIALS, missing or refused by the token
// endpoint (a local one named by the key file).
func TestGCSApplicationDefaultCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	_, err := stash.Open(t.Context(), "gs://bkt/p")
	expect(t, err, driver.Unavailable, "no Google credentials")

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
	s, err := stash.OpenGCS(t.Context(), "bkt", "p", stash.GCSOptions{Endpoint: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Put(t.Context(), []byte("x"))
	expect(t, err, driver.PermissionDenied, "application-default login")
	if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("error shows the key: %v", err)
	}
}

// The file stash shared by two processes: one writes, the other reads,
// verifies and deletes, and the reverse.
func TestFileStoreAcrossProcesses(t *testing.T) {
	t.Parallel()
	loc := "file://" + filepath.ToSlash(t.TempDir())
	data := bytes.Repeat([]byte("x"), 3<<20)

	// This process writes; a child reads, verifies and deletes.
	s, err := stash.Open(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Put(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	out := child(t, "load-delete", obj.URL, obj.SHA256, strconv.FormatInt(obj.Size, 10))
	if out != "ok "+strconv.Itoa(len(data)) {
		t.Fatalf("child said %q", out)
	}
	if _, err := s.Get(t.Context(), obj.SHA256, -1); driver.CodeOf(err) != driver.NotFound {
		t.Errorf("object still there after the child deleted it: %v", err)
	}

	// A child writes; this process reads it.
	parts := strings.Fields(child(t, "put", loc, "from the child"))
	if len(parts) != 3 {
		t.Fatalf("child said %q", parts)
	}
	size, _ := strconv.ParseInt(parts[2], 10, 64)
	got, err := stash.Load(t.Context(), s, parts[0], parts[1], size)
	if err != nil || string(got) != "from the child" {
		t.Fatalf("Load of the child's object = %q, %v", got, err)
	}
}

// child runs this test binary as a helper process (see TestHelperProcess).
func child(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "JOBQ_STASH_HELPER="+strings.Join(args, "\x1f"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper process %v: %v\n%s", args, err, out)
	}
	// The test framework prints PASS after the helper's line.
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}

// TestHelperProcess is the other process of TestFileStoreAcrossProcesses.
func TestHelperProcess(t *testing.T) {
	spec := os.Getenv("JOBQ_STASH_HELPER")
	if spec == "" {
		t.Skip("helper process for TestFileStoreAcrossProcesses")
	}
	args := strings.Split(spec, "\x1f")
	c := context.Background()
	switch args[0] {
	case "load-delete":
		loc, name, err := stash.Split(args[1])
		if err != nil {
			fail(err)
		}
		s, err := stash.Open(c, loc)
		if err != nil {
			fail(err)
		}
		size, _ := strconv.ParseInt(args[3], 10, 64)
		data, err := stash.Load(c, s, args[1], args[2], size)
		if err != nil {
			fail(err)
		}
		if err := s.Delete(c, name); err != nil {
			fail(err)
		}
		fmt.Printf("ok %d\n", len(data))
	case "put":
		s, err := stash.Open(c, args[1])
		if err != nil {
			fail(err)
		}
		obj, err := s.Put(c, []byte(args[2]))
		if err != nil {
			fail(err)
		}
		fmt.Printf("%s %s %d\n", obj.URL, obj.SHA256, obj.Size)
	}
	os.Exit(0)
}

func fail(err error) {
	fmt.Println("error:", err)
	os.Exit(1)
}

func BenchmarkStore(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16) // 5 MiB
	for kind, setup := range setups() {
		b.Run(kind+"/put-load-delete-5MiB", func(b *testing.B) {
			bundle := setup(b).store
			b.SetBytes(int64(len(data)))
			for i := 0; b.Loop(); i++ {
				d := append(data[:len(data):len(data)], byte(i), byte(i>>8), byte(i>>16))
				obj, err := bundle.Put(b.Context(), d)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := stash.Load(b.Context(), bundle, obj.URL, obj.SHA256, obj.Size); err != nil {
					b.Fatal(err)
				}
				if err := bundle.Delete(b.Context(), obj.SHA256); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
