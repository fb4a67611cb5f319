package servicebus_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/servicebus"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash/azblob"
)

// openSBDriver opens rawURL's driver, closed when the test ends.
func openSBDriver(t *testing.T, rawURL string) (driver.Driver, error) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	d, err := servicebus.DefaultOpener.Open(ctxT(t), u, driver.OpenOptions{})
	if err == nil {
		t.Cleanup(func() { _ = d.Close() })
	}
	return d, err
}

// TestResultsNeedAContainer: without results= the queue keeps no records,
// declares so, and says how to configure a container.
func TestResultsNeedAContainer(t *testing.T) {
	t.Parallel()
	d, err := openSBDriver(t, newQueueURL(t))
	if err != nil {
		t.Fatal(err)
	}
	caps := d.Capabilities()
	if caps.Level(driver.Results) != driver.Unsupported || caps.Level(driver.Cancel) != driver.Unsupported {
		t.Fatalf("Results %v, Cancel %v without results=; want unsupported", caps.Level(driver.Results), caps.Level(driver.Cancel))
	}
	if s := caps.Features[driver.Dependencies]; s.Level != driver.Unsupported || !strings.Contains(s.Fallback, "results=azblob://") {
		t.Fatalf("Dependencies %v (%q) without results=; want unsupported saying how to set results=", s.Level, s.Fallback)
	}
	_, err = d.(driver.ResultStore).GetResults(ctxT(t), []string{"x"})
	if errcode.Of(err) != errcode.Unimplemented || !strings.Contains(err.Error(), "results=azblob://") {
		t.Fatalf("GetResults: %v, want Unimplemented saying how to set results=", err)
	}
	q, _ := open(t, newQueueURL(t))
	for what, err := range map[string]error{
		"Result": func() error { _, err := q.Result(ctxT(t), "x"); return err }(),
		"Cancel": func() error { _, err := q.Admin().Cancel(ctxT(t), "x"); return err }(),
	} {
		if errcode.Of(err) != errcode.Unimplemented || !strings.Contains(err.Error(), "results=azblob://") {
			t.Errorf("Queue.%s: %v, want Unimplemented saying how to set results=", what, err)
		}
	}
}

// TestResultsInTheNamedContainer: with results= the records are blobs in
// that container, created on first use.
func TestResultsInTheNamedContainer(t *testing.T) {
	t.Parallel()
	d, err := openSBDriver(t, newQueueURL(t, resultsParam(t)))
	if err != nil {
		t.Fatal(err)
	}
	caps := d.Capabilities()
	if caps.Level(driver.Results) != driver.Emulated || caps.Level(driver.Cancel) != driver.Emulated {
		t.Fatalf("Results %v, Cancel %v with results=; want emulated", caps.Level(driver.Results), caps.Level(driver.Cancel))
	}
	rs := d.(driver.ResultStore)
	now := time.Now()
	ctx := ctxT(t)
	if err := rs.PutResults(ctx, []*driver.ResultRecord{{ID: "a", State: driver.ResultDeadLettered, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := rs.GetResults(ctx, []string{"a", "b"})
	if err != nil || got[0] == nil || got[0].State != driver.ResultDeadLettered || got[1] != nil {
		t.Fatalf("GetResults: %+v, %v", got, err)
	}
}

// TestBadResultsParameter: a results= value that names no container is
// refused before anything connects.
func TestBadResultsParameter(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"mycontainer", "azblob://devstoreaccount1/Bad_Name", "https://a.blob.core.windows.net/c?x=1"} {
		_, err := openSBDriver(t, newQueueURL(t, "results="+url.QueryEscape(v)))
		if errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("results=%s: %v, want InvalidArgument", v, err)
		}
	}
}

// TestNewWithResultsClient: a program that builds the queue from its own
// clients passes the result container's client in Options.Results, and
// the records of its tasks go there.
func TestNewWithResultsClient(t *testing.T) {
	t.Parallel()
	client, adm := emulatorClients(t)
	ctx := ctxT(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	cname := "sbr-" + hex.EncodeToString(b)
	c, err := container.NewClientFromConnectionString(azblob.DevelopmentConnectionString, cname, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), nil) })
	d, err := servicebus.New(ctx, client, adm, servicebus.Options{Queue: freshName(), Create: true, LockDuration: lockDuration, Results: c})
	if err != nil {
		t.Fatal(err)
	}
	q, err := newQueue(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	pushed, err := q.Push(ctx, &jobq.Task{Command: "echo with-results"})
	if err != nil {
		t.Fatal(err)
	}
	if err := receive(t, q).Complete(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := q.Result(ctx, pushed.ID)
	if err != nil || r.State != driver.ResultSucceeded {
		t.Fatalf("Result: %+v, %v; want succeeded", r, err)
	}
	if _, err := c.NewBlobClient(pushed.ID).GetProperties(ctx, nil); err != nil {
		t.Fatalf("the record is not in the given container: %v", err)
	}
}

// TestResultsSASNeverShown: a container URL with a SAS, URL-encoded in the
// queue URL's results=, must not show its signature in the queue's logs
// (every line carries the queue URL) or in its errors.
func TestResultsSASNeverShown(t *testing.T) {
	t.Parallel()
	const sig = "S1GNATURE0SECRET"
	sas := "http://127.0.0.1:10000/devstoreaccount1/sbsas-never-shown?sv=2021-08-06&sp=rwdlc&sig=" + sig
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	q, err := jobq.OpenWithOptions(ctxT(t), newQueueURL(t, "results="+url.QueryEscape(sas)), jobq.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// The signature is not valid: the push fails on the result container.
	_, err = q.Push(ctxT(t), &jobq.Task{Command: "echo hi", Group: "g"})
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), sig) {
		t.Errorf("the logs show the SAS signature:\n%s", logs.String())
	}
	if err != nil && strings.Contains(err.Error(), sig) {
		t.Errorf("the error shows the SAS signature: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
