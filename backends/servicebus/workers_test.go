package servicebus_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestWorkersNeedAContainer: without results= the queue keeps no worker
// registry, declares so, and Admin.Workers says how to configure one.
func TestWorkersNeedAContainer(t *testing.T) {
	t.Parallel()
	d, err := openSBDriver(t, newQueueURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if l := d.Capabilities().Level(driver.WorkerRegistry); l != driver.Unsupported {
		t.Fatalf("worker-registry %v without results=; want unsupported", l)
	}
	q, _ := open(t, newQueueURL(t))
	_, err = q.Admin().Workers(ctxT(t), jobq.WorkersOptions{})
	if errcode.Of(err) != errcode.Unimplemented || !strings.Contains(err.Error(), "results=azblob://") {
		t.Fatalf("Queue.Workers: %v, want Unimplemented saying how to set results=", err)
	}
}
