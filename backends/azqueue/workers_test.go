package azqueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestWorkersNeedTheResultContainer: a queue built by New without a result
// container keeps no worker registry, declares so, and says why.
func TestWorkersNeedTheResultContainer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newQueueURL(t)
	svc, err := azqueue.NewServiceClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := azq.New(ctx, svc, azq.Options{Queue: u[strings.LastIndex(u, "/")+1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if s := d.Capabilities().Features[driver.WorkerRegistry]; s.Level != driver.Unsupported || !strings.Contains(s.Fallback, "Options.Results") {
		t.Fatalf("worker-registry declared %+v; want unsupported, naming Options.Results", s)
	}
	_, err = d.ListWorkers(ctx, time.Time{})
	if errcode.Of(err) != errcode.Unimplemented || !strings.Contains(err.Error(), "Options.Results") {
		t.Fatalf("ListWorkers: %v, want Unimplemented naming Options.Results", err)
	}
}
