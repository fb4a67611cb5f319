package azqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/stash/azblob"
)

// The tests run against Azurite on 127.0.0.1:10001 (started by
// .ci/start-azurite.sh, which TestMain runs when nothing listens there), or
// against a real account when $JOBQ_TEST_AZQUEUE_CONNECTION_STRING is set.
// Every test uses its own queue, deleted when it ends.

const envTestConnectionString = "JOBQ_TEST_AZQUEUE_CONNECTION_STRING"

// connStr is the connection string the tests use.
var connStr string

func TestMain(m *testing.M) {
	connStr = os.Getenv(envTestConnectionString)
	if connStr == "" {
		connStr = azq.DevelopmentConnectionString
		if err := ensureAzurite(); err != nil {
			fmt.Fprintln(os.Stderr, "azqueue tests need Azurite:", err)
			os.Exit(1)
		}
	}
	// The driver reads the connection string the way users give it.
	os.Setenv(azq.EnvConnectionString, connStr)
	os.Exit(m.Run())
}

func ensureAzurite() error {
	// The queue service, and the blob service of the result records.
	up := true
	for _, addr := range []string{"127.0.0.1:10001", "127.0.0.1:10000"} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			up = false
			break
		}
		c.Close()
	}
	if up {
		return nil
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

// newQueueURL returns a fresh queue's URL and deletes the queue and its
// dead-letter queue when the test ends.
func newQueueURL(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "jq-" + sanitize(t.Name(), 30) + "-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		svc, err := azqueue.NewServiceClientFromConnectionString(connStr, nil)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = svc.DeleteQueue(ctx, name, nil)
		_, _ = svc.DeleteQueue(ctx, name+azq.FailedSuffix, nil)
		if c, err := resultsContainer(name + azq.ResultsSuffix); err == nil {
			_, _ = c.Delete(ctx, nil)
		}
	})
	return "azqueue://devstoreaccount1/" + name
}

// sanitize turns a test name into queue-name characters.
func sanitize(s string, n int) string {
	var b strings.Builder
	dash := true
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= n {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// pushRaw stores body as one message, bypassing the portable layer.
func pushRaw(ctx context.Context, rawURL string, body []byte) error {
	d, err := openDriver(ctx, rawURL)
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = d.Push(ctx, []*driver.Message{{ID: "raw", Body: body}})
	return err
}

func openDriver(ctx context.Context, rawURL string) (driver.Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return azq.DefaultOpener.Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
}

// openQueue opens a fresh queue through the portable API.
func openQueue(t *testing.T) (*jobq.Queue, string) {
	t.Helper()
	u := newQueueURL(t)
	q, err := jobq.OpenWithOptions(t.Context(), u, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	t.Cleanup(func() { q.Close() })
	return q, u
}

// mainClient returns the SDK client of q's main queue (the escape hatch).
func mainClient(t *testing.T, q *jobq.Queue) *azqueue.QueueClient {
	t.Helper()
	var c *azqueue.QueueClient
	if !q.As(&c) || c == nil {
		t.Fatal("As(**azqueue.QueueClient) = false")
	}
	return c
}

// deadClient returns the SDK client of q's dead-letter queue.
func deadClient(t *testing.T, q *jobq.Queue) *azqueue.QueueClient {
	t.Helper()
	var d azq.DeadLetterQueue
	if !q.As(&d) || d.QueueClient == nil {
		t.Fatal("As(*azqueue.DeadLetterQueue) = false")
	}
	return d.QueueClient
}

// resultsContainer is the client of a result container of the test
// account.
func resultsContainer(name string) (*container.Client, error) {
	cs := connStr
	if cs == azq.DevelopmentConnectionString {
		cs = azblob.DevelopmentConnectionString
	}
	return container.NewClientFromConnectionString(cs, name, nil)
}
