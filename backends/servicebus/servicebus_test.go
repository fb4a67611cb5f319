package servicebus_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/servicebus"
	emu "github.com/jobq/jobq/emulators/servicebus"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/stash/azblob"
)

// lockDuration is the test queues' lock duration: short, so that lock
// expiry is quick to test, long enough for a busy machine (and Azure's
// minimum).
const lockDuration = 5 * time.Second

// maxDeliveryCount is the test queues' max delivery count.
const maxDeliveryCount = 10

// env describes where the tests run: the emulator this package started, or
// a namespace from $JOBQ_TEST_SERVICEBUS_CONNECTION_STRING.
var env struct {
	skip    string // why the tests cannot run, or ""
	connStr string
	query   string // URL parameters every test queue gets
	live    bool
	proxy   *proxy // between the SDK and the emulator, to cut connections
	emu     *emu.Emulator
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if cs := os.Getenv("JOBQ_TEST_SERVICEBUS_CONNECTION_STRING"); cs != "" {
		env.connStr, env.live = cs, true
		env.query = fmt.Sprintf("create=true&lock_duration=%v&max_delivery_count=%d", lockDuration, maxDeliveryCount)
		if extra := os.Getenv("JOBQ_TEST_SERVICEBUS_PARAMS"); extra != "" {
			env.query += "&" + extra // for example admin=localhost:5300
		}
	} else if err := emu.Available(); err != nil {
		env.skip = err.Error()
	} else {
		e, err := emu.Launch(context.Background(), emu.Options{LockDuration: lockDuration, MaxDeliveryCount: maxDeliveryCount})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer e.Stop()
		env.emu = e
		p, err := newProxy(fmt.Sprintf("127.0.0.1:%d", e.AMQPPort))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer p.close()
		env.proxy = p
		env.connStr = strings.Replace(e.ConnectionString(), fmt.Sprint(e.AMQPPort), fmt.Sprint(p.ln.Addr().(*net.TCPAddr).Port), 1)
		env.query = fmt.Sprintf("admin=127.0.0.1:%d&create=true&lock_duration=%v&max_delivery_count=%d", e.AdminPort, lockDuration, maxDeliveryCount)
	}
	os.Setenv("JOBQ_SERVICEBUS_CONNECTION_STRING", env.connStr)
	// Result records go to Azurite's blob service, as azblob://devstoreaccount1/...
	if os.Getenv("AZURE_STORAGE_CONNECTION_STRING") == "" {
		os.Setenv("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true")
	}
	if err := ensureAzuriteBlob(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if binary.path != "" {
		_ = os.RemoveAll(filepath.Dir(binary.path))
	}
	return code
}

// newQueueURL returns the URL of a fresh queue (the emulator creates queues
// on first use; a live namespace gets create=true).
func newQueueURL(t testing.TB, extra ...string) string {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t-" + hex.EncodeToString(b)
	url := "sb://emulator/" + name + "?" + strings.Join(append([]string{env.query}, extra...), "&")
	if env.live {
		t.Cleanup(func() { deleteQueue(url, name) })
	}
	return url
}

// ensureAzuriteBlob starts Azurite (.ci/start-azurite.sh) when nothing
// listens on its blob port.
func ensureAzuriteBlob() error {
	if c, err := net.DialTimeout("tcp", "127.0.0.1:10000", time.Second); err == nil {
		return c.Close()
	}
	script, err := filepath.Abs("../../.ci/start-azurite.sh")
	if err != nil {
		return err
	}
	if out, err := exec.Command(script).CombinedOutput(); err != nil {
		return fmt.Errorf("the result-record tests need Azurite's blob service: %s: %w\n%s", script, err, out)
	}
	return nil
}

// blobConnectionString is the Azurite the result records go to:
// $AZURE_STORAGE_CONNECTION_STRING when it names one, else the default
// development account on 127.0.0.1:10000.
func blobConnectionString() string {
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); strings.Contains(cs, "BlobEndpoint=") {
		return cs
	}
	return azblob.DevelopmentConnectionString
}

// resultsParam is a results= parameter naming a fresh container in
// Azurite, deleted when the test ends.
func resultsParam(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "sbr-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		c, err := container.NewClientFromConnectionString(blobConnectionString(), name, nil)
		if err == nil {
			_, _ = c.Delete(context.Background(), nil)
		}
	})
	return "results=azblob://devstoreaccount1/" + name
}

// deleteQueue removes a queue the tests created on a live namespace.
func deleteQueue(url, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := jobq.Open(ctx, url)
	if err != nil {
		return
	}
	defer q.Close()
	var a *admin.Client
	if q.As(&a) {
		_, _ = a.DeleteQueue(ctx, name, nil)
	}
}

// logBuffer collects the portable layer's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func open(t testing.TB, url string) (*jobq.Queue, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := jobq.OpenWithOptions(ctx, url, jobq.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("open %s: %v", redact.URL(url), err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, logs
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func receive(t testing.TB, q *jobq.Queue) *jobq.Envelope {
	t.Helper()
	env, err := q.Receive(ctxT(t), jobq.ReceiveOptions{Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return env
}
