package azblob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/conformance"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
	azb "github.com/jobq/jobq/stash/azblob"
	"github.com/jobq/jobq/stash/stashtest"
)

// The tests run against Azurite's blob service on 127.0.0.1:10000 (started
// by .ci/start-azurite.sh, which TestMain runs when nothing listens there),
// or against a real account when $JOBQ_TEST_AZBLOB_CONNECTION_STRING is
// set. Every store gets a container of its own, deleted when its test ends.

const envTestConnectionString = "JOBQ_TEST_AZBLOB_CONNECTION_STRING"

// connStr is the connection string the tests use; account is its account.
var connStr, account string

func TestMain(m *testing.M) {
	connStr = os.Getenv(envTestConnectionString)
	if connStr == "" {
		connStr = azb.DevelopmentConnectionString
		if err := ensureAzurite(); err != nil {
			fmt.Fprintln(os.Stderr, "azblob tests need Azurite:", err)
			os.Exit(1)
		}
	}
	for part := range strings.SplitSeq(connStr, ";") {
		if k, v, _ := strings.Cut(part, "="); k == "AccountName" {
			account = v
		}
	}
	// The store finds the connection string the way users give it.
	os.Setenv(azb.EnvAzureConnectionString, connStr)
	os.Exit(m.Run())
}

func ensureAzurite() error {
	if c, err := net.DialTimeout("tcp", "127.0.0.1:10000", time.Second); err == nil {
		return c.Close()
	}
	script, err := filepath.Abs("../../.ci/start-azurite.sh")
	if err != nil {
		return err
	}
	out, err := exec.Command(script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", script, err, out)
	}
	return nil
}

// newContainer creates a fresh container and deletes it when t ends.
func newContainer(t testing.TB) *container.Client {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	c, err := container.NewClientFromConnectionString(connStr, "jq-"+hex.EncodeToString(b[:]), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil {
		t.Fatalf("create container: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.Delete(ctx, nil)
	})
	return c
}

func containerName(c *container.Client) string {
	u, _ := url.Parse(c.URL())
	return u.Path[strings.LastIndex(u.Path, "/")+1:]
}

// TestStore runs the store contract on Azurite, each store opened by URL
// in a container of its own.
func TestStore(t *testing.T) {
	t.Parallel()
	stashtest.Run(t, stashtest.Harness{
		NewStore: func(t testing.TB) stash.Store {
			c := newContainer(t)
			s, err := stash.Open(t.Context(), "azblob://"+account+"/"+containerName(c)+"/jobs/big")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Overwrite: func(t testing.TB, s stash.Store, name string, data []byte) {
			rest := strings.TrimPrefix(s.Location(), "azblob://"+account+"/")
			cont, prefix, _ := strings.Cut(rest, "/")
			c, err := container.NewClientFromConnectionString(connStr, cont, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.NewBlockBlobClient(prefix+"/"+name).Upload(t.Context(), streaming.NopCloser(bytes.NewReader(data)), nil); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestNew: a store built from the caller's container client, with the
// same objects and metadata as one opened by URL.
func TestNew(t *testing.T) {
	t.Parallel()
	c := newContainer(t)
	s, err := azb.New(c, account, "/p/")
	if err != nil {
		t.Fatal(err)
	}
	if want := "azblob://" + account + "/" + containerName(c) + "/p"; s.Location() != want {
		t.Errorf("Location = %s, want %s", s.Location(), want)
	}
	obj, err := s.Put(t.Context(), []byte(`{"k": "v"}`))
	if err != nil {
		t.Fatal(err)
	}
	props, err := c.NewBlobClient("p/"+obj.SHA256).GetProperties(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if props.ContentType == nil || *props.ContentType != "application/json" || props.Metadata["Sha256"] == nil && props.Metadata["sha256"] == nil {
		t.Errorf("blob properties: content type %v, metadata %v; want application/json and sha256", props.ContentType, props.Metadata)
	}
	_, err = azb.New(nil, account, "")
	expect(t, err, errcode.InvalidArgument, "needs a container client")
}

// TestOpenRejects: URLs the store cannot use.
func TestOpenRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, msg string }{
		{"azblob:///c/p", "storage account \"\""},
		{"azblob://Bad_Account/c/p", "storage account \"Bad_Account\""},
		{"azblob://" + account, "container \"\""},
		{"azblob://" + account + "/a--b/p", "container \"a--b\""},
		{"azblob://" + account + "/a" + strings.Repeat("-b", 32) + "/p", "is not 3 to 63"}, // 65 characters
	} {
		_, err := stash.Open(t.Context(), tc.url)
		expect(t, err, errcode.InvalidArgument, tc.msg)
	}
}

// failingCredential refuses every token request.
type failingCredential struct{}

func (failingCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, errors.New("token refused by the test")
}

// TestCredentials: a connection string serves only its own account (a URL
// naming another goes to Entra ID, here a credential that refuses), and
// "UseDevelopmentStorage=true" means Azurite.
func TestCredentials(t *testing.T) {
	t.Parallel()
	c := newContainer(t)
	other := &azb.URLOpener{ConnectionString: connStr, Credential: failingCredential{}}
	u, _ := url.Parse("azblob://someoneelse/" + containerName(c) + "/p")
	s, err := other.OpenStoreURL(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(t.Context(), []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "token refused by the test") {
		t.Errorf("Put to another account = %v, want the credential's refusal", err)
	}
	if os.Getenv(envTestConnectionString) != "" {
		return
	}
	dev := &azb.URLOpener{ConnectionString: "UseDevelopmentStorage=true", Credential: failingCredential{}}
	u, _ = url.Parse("azblob://devstoreaccount1/" + containerName(c) + "/p")
	s, err = dev.OpenStoreURL(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), []byte("x")); err != nil {
		t.Errorf("Put with UseDevelopmentStorage=true: %v", err)
	}
}

// faultFront serves blob requests in front of Azurite: each request that
// fail returns true for is answered with status; the others pass through.
func faultFront(t *testing.T, status int, fail func(n int64) bool) (string, *atomic.Int64) {
	t.Helper()
	target, _ := url.Parse("http://127.0.0.1:10000")
	proxy := httputil.NewSingleHostReverseProxy(target)
	requests := new(atomic.Int64)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fail(requests.Add(1)) {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("x-ms-error-code", "Injected")
		w.WriteHeader(status)
	}))
	t.Cleanup(front.Close)
	return front.URL, requests
}

// TestErrors checks how failures are classified: the codes decide whether
// a receiver dead-letters a message or leaves it for later.
func TestErrors(t *testing.T) {
	t.Parallel()
	if os.Getenv(envTestConnectionString) != "" {
		t.Skip("fault injection runs on Azurite only")
	}
	c := newContainer(t)
	cont := containerName(c)
	const key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	fast := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond}}}
	open := func(t *testing.T, endpoint, key, cont string) stash.Store {
		t.Helper()
		o := &azb.URLOpener{ConnectionString: "AccountName=devstoreaccount1;AccountKey=" + key + ";BlobEndpoint=" + endpoint + "/devstoreaccount1", ClientOptions: fast}
		u, _ := url.Parse("azblob://devstoreaccount1/" + cont + "/p")
		s, err := o.OpenStoreURL(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	name := stash.Sum([]byte("x"))
	for _, tc := range []struct {
		name   string
		status int
		op     string
		code   errcode.Code
		tries  int64
	}{
		{"503 get is retried", http.StatusServiceUnavailable, "get", errcode.Unavailable, 3},
		{"500 put is retried", http.StatusInternalServerError, "put", errcode.Unavailable, 3},
		{"403 delete", http.StatusForbidden, "delete", errcode.PermissionDenied, 1},
		{"400 put", http.StatusBadRequest, "put", errcode.InvalidArgument, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			endpoint, requests := faultFront(t, tc.status, func(int64) bool { return true })
			s := open(t, endpoint, key, cont)
			var err error
			switch tc.op {
			case "put":
				_, err = s.Put(t.Context(), []byte("x"))
			case "get":
				_, err = s.Get(t.Context(), name, -1)
			case "delete":
				err = s.Delete(t.Context(), name)
			}
			if errcode.Of(err) != tc.code {
				t.Errorf("error %v (code %v), want %v", err, errcode.Of(err), tc.code)
			}
			if n := requests.Load(); n != tc.tries {
				t.Errorf("%d requests, want %d", n, tc.tries)
			}
		})
	}
	t.Run("a transient failure is retried to success", func(t *testing.T) {
		t.Parallel()
		endpoint, _ := faultFront(t, http.StatusServiceUnavailable, func(n int64) bool { return n == 1 })
		s := open(t, endpoint, key, cont)
		obj, err := s.Put(t.Context(), []byte("retried"))
		if err != nil {
			t.Fatalf("Put after one 503: %v", err)
		}
		if got, err := stash.Load(t.Context(), s, obj.URL, obj.SHA256, obj.Size); err != nil || string(got) != "retried" {
			t.Errorf("Load = %q, %v", got, err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		t.Parallel()
		wrong := strings.Repeat("A", 86) + "=="
		s := open(t, "http://127.0.0.1:10000", wrong, cont)
		_, err := s.Put(t.Context(), []byte("x"))
		expect(t, err, errcode.PermissionDenied, "Storage Blob Data Contributor")
		if err != nil && (strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), key)) {
			t.Errorf("error shows the key: %v", err)
		}
	})
	t.Run("missing container", func(t *testing.T) {
		t.Parallel()
		s := open(t, "http://127.0.0.1:10000", key, "no-such-container")
		_, err := s.Put(t.Context(), []byte("x"))
		expect(t, err, errcode.NotFound, "container does not exist")
	})
}

// TestErrorsHideSAS: a store given a SAS connection string says what
// failed without its signature, whether the request never reached the
// service (the SDK's error quotes the request URL with its query) or the
// service refused it.
func TestErrorsHideSAS(t *testing.T) {
	t.Parallel()
	if os.Getenv(envTestConnectionString) != "" {
		t.Skip("runs on Azurite only")
	}
	const sig = "S3CRETsig"
	fast := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}
	name := stash.Sum([]byte("x"))
	for _, tc := range []struct{ name, endpoint string }{
		{"nothing listens", "http://127.0.0.1:1"},
		{"Azurite refuses the signature", "http://127.0.0.1:10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := &azb.URLOpener{ConnectionString: "BlobEndpoint=" + tc.endpoint + "/devstoreaccount1;SharedAccessSignature=sv=2021-08-06&sp=rwdlc&sig=" + sig, ClientOptions: fast}
			u, _ := url.Parse("azblob://devstoreaccount1/sas-never-shown/p")
			s, err := o.OpenStoreURL(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			_, putErr := s.Put(t.Context(), []byte("x"))
			_, getErr := s.Get(t.Context(), name, -1)
			delErr := s.Delete(t.Context(), name)
			for op, err := range map[string]error{"put": putErr, "get": getErr, "delete": delErr} {
				if err == nil {
					t.Errorf("%s: no error", op)
				} else if strings.Contains(err.Error(), sig) || !strings.Contains(err.Error(), "sas-never-shown") {
					t.Errorf("%s: the error shows the signature or not the container: %v", op, err)
				}
			}
		})
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
	s, err := azb.New(newContainer(b), account, "bench")
	if err != nil {
		b.Fatal(err)
	}
	stashtest.Benchmark(b, s)
}

// TestConformance runs the suite's Stash check with this store, on SQLite
// limited to 64 KiB messages.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.RunStash(t, conformance.Harness{Name: "sqlite", NewQueueURL: func(t testing.TB) string {
		return "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=big&max_message_bytes=65536"
	}}, conformance.StashHarness{Name: "azblob", NewStashURL: func(t testing.TB) string {
		return "azblob://" + account + "/" + containerName(newContainer(t)) + "/jobq"
	}})
}
