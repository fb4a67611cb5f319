package azqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func resultRecord(id string, state driver.ResultState) *driver.ResultRecord {
	now := time.Now()
	return &driver.ResultRecord{ID: id, State: state, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Data: []byte(`{"id":"` + id + `"}`)}
}

// TestResultsInTheDefaultContainer: the records of a queue opened from a
// URL go to QUEUE-results in the same account, created on first use.
func TestResultsInTheDefaultContainer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newQueueURL(t)
	d, err := openDriver(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	caps := d.Capabilities()
	if caps.Level(driver.Results) != driver.Emulated || caps.Level(driver.Cancel) != driver.Emulated {
		t.Fatalf("Results %v, Cancel %v; want emulated", caps.Level(driver.Results), caps.Level(driver.Cancel))
	}
	rs := d.(driver.ResultStore)
	if err := rs.PutResults(ctx, []*driver.ResultRecord{resultRecord("t1", driver.ResultSucceeded)}); err != nil {
		t.Fatal(err)
	}
	got, err := rs.GetResults(ctx, []string{"t1", "t2"})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] == nil || got[0].State != driver.ResultSucceeded || got[1] != nil {
		t.Fatalf("records %+v, %+v", got[0], got[1])
	}
	name := u[strings.LastIndex(u, "/")+1:]
	c, err := resultsContainer(name + azq.ResultsSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewBlobClient("t1").GetProperties(ctx, nil); err != nil {
		t.Fatalf("the record is not the blob t1 in %s%s: %v", name, azq.ResultsSuffix, err)
	}
}

// TestResultsParameterNamesTheContainer: results= puts the records in
// another container.
func TestResultsParameterNamesTheContainer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newQueueURL(t)
	other := "jq-other-" + u[len(u)-12:]
	c, err := resultsContainer(other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), nil) })
	d, err := openDriver(ctx, u+"?results="+other)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.(driver.ResultStore).PutResults(ctx, []*driver.ResultRecord{resultRecord("t1", driver.ResultCancelled)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewBlobClient("t1").GetProperties(ctx, nil); err != nil {
		t.Fatalf("the record is not in %s: %v", other, err)
	}
	if _, err := openDriver(ctx, u+"?results=Not_A_Container"); errcode.Of(err) != errcode.InvalidArgument {
		t.Fatalf("bad results=: %v, want InvalidArgument", err)
	}
}

// TestNewWithoutResultsContainer: New has no credentials to build a blob
// client with, so without Options.Results the queue keeps no results, and
// says how to get them.
func TestNewWithoutResultsContainer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newQueueURL(t)
	svc, err := azqueue.NewServiceClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := u[strings.LastIndex(u, "/")+1:]
	d, err := azq.New(ctx, svc, azq.Options{Queue: name})
	if err != nil {
		t.Fatal(err)
	}
	if l := d.Capabilities().Level(driver.Results); l != driver.Unsupported {
		t.Fatalf("Results %v, want unsupported", l)
	}
	if l := d.Capabilities().Level(driver.Groups); l != driver.Unsupported {
		t.Fatalf("Groups %v without a record container, want unsupported", l)
	}
	if l := d.Capabilities().Level(driver.ResultHistory); l != driver.Unsupported {
		t.Fatalf("ResultHistory %v without a record container, want unsupported", l)
	}
	if s := d.Capabilities().Features[driver.Dependencies]; s.Level != driver.Unsupported || !strings.Contains(s.Fallback, "Options.Results") {
		t.Fatalf("Dependencies %v (%q) without a record container, want unsupported naming Options.Results", s.Level, s.Fallback)
	}
	_, err = d.GetResults(ctx, []string{"x"})
	if errcode.Of(err) != errcode.Unimplemented || !strings.Contains(err.Error(), "Options.Results") {
		t.Fatalf("GetResults: %v, want Unimplemented naming Options.Results", err)
	}
	c, err := resultsContainer(name + azq.ResultsSuffix)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := azq.New(ctx, svc, azq.Options{Queue: name, Results: c})
	if err != nil {
		t.Fatal(err)
	}
	if l := d2.Capabilities().Level(driver.ResultHistory); l != driver.Emulated {
		t.Fatalf("ResultHistory %v with a record container, want emulated (a listing jobq adds up)", l)
	}
	if l := d2.Capabilities().Level(driver.Dependencies); l != driver.Emulated {
		t.Fatalf("Dependencies %v with a record container, want emulated (held tasks are blobs)", l)
	}
	if err := d2.PutResults(ctx, []*driver.ResultRecord{resultRecord("y", driver.ResultSucceeded)}); err != nil {
		t.Fatal(err)
	}
	if got, err := d2.GetResults(ctx, []string{"y"}); err != nil || got[0] == nil {
		t.Fatalf("GetResults with Options.Results: %v, %v", got, err)
	}
}

// TestResultsContainerNameRules: results= takes exactly the names Azure
// takes. A long name of single hyphens (64 characters or more) was accepted
// and every push then failed with Azure's raw 400 OutOfRangeInput; a
// three-character name with a hyphen, which Azure accepts, was refused.
func TestResultsContainerNameRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"h-b", true},
		{"jq" + strings.Repeat("-x", 31), false}, // 64 characters
		{"jq" + strings.Repeat("-x", 40), false},
		{"jq-" + strings.Repeat("x", 60), true}, // 63 characters
	} {
		t.Run(fmt.Sprintf("%d-%t", len(tc.name), tc.ok), func(t *testing.T) {
			t.Parallel()
			u := newQueueURL(t)
			d, err := openDriver(ctx, u+"?results="+tc.name)
			if !tc.ok {
				if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "results=") {
					t.Fatalf("open with results=%s (%d characters): %v; want InvalidArgument naming results=", tc.name, len(tc.name), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("open with results=%s: %v", tc.name, err)
			}
			defer d.Close()
			c, err := resultsContainer(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = c.Delete(context.Background(), nil) })
			id := "t-" + u[len(u)-12:]
			if err := d.(driver.ResultStore).PutResults(ctx, []*driver.ResultRecord{resultRecord(id, driver.ResultSucceeded)}); err != nil {
				t.Fatalf("store a record in %s: %v", tc.name, err)
			}
			if _, err := c.NewBlobClient(id).GetProperties(ctx, nil); err != nil {
				t.Fatalf("the record is not in %s: %v", tc.name, err)
			}
		})
	}
}

// TestResultsErrorIsOneLine: a refused Blob Storage request is reported in
// one line, with its status and code, not the SDK's many lines of request
// and XML body.
func TestResultsErrorIsOneLine(t *testing.T) {
	t.Parallel()
	if connStr != azq.DevelopmentConnectionString {
		t.Skip("needs Azurite: builds a connection string with a wrong key")
	}
	const wrongKey = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
	cs := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + wrongKey +
		";QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
	q, err := jobq.OpenWithOptions(t.Context(), newQueueURL(t), jobq.Options{ConnectionString: cs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = q.Result(t.Context(), "t1")
	if errcode.Of(err) != errcode.PermissionDenied {
		t.Fatalf("result with a wrong key: %v; want PermissionDenied", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "HTTP 403") || strings.Contains(msg, wrongKey) {
		t.Errorf("error is not one line with the HTTP status (or shows the key):\n%s", msg)
	}
}

// TestResultBlobNamesNeverEndWithADot: Azure asks to avoid blob names that
// end with a dot (URL handling may drop it, so the record of "step1." would
// be read as that of "step1"). Azurite keeps them, so the test looks at the
// names: such an ID's record is stored under a hashed name, and reads back.
func TestResultBlobNamesNeverEndWithADot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newQueueURL(t)
	d, err := openDriver(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rs := d.(driver.ResultStore)
	ids := []string{"step1.", "step1", "a.b.."}
	for _, id := range ids {
		if err := rs.PutResults(ctx, []*driver.ResultRecord{resultRecord(id, driver.ResultSucceeded)}); err != nil {
			t.Fatalf("put %q: %v", id, err)
		}
	}
	got, err := rs.GetResults(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if got[i] == nil || got[i].ID != id {
			t.Errorf("record of %q reads back as %+v", id, got[i])
		}
	}
	c, err := resultsContainer(u[strings.LastIndex(u, "/")+1:] + azq.ResultsSuffix)
	if err != nil {
		t.Fatal(err)
	}
	pager := c.NewListBlobsFlatPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			if strings.HasSuffix(*b.Name, ".") {
				t.Errorf("blob %q ends with a dot", *b.Name)
			}
		}
	}
}
