package servicebus_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq"
	sb "github.com/jobq/jobq/backends/servicebus"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/faultproxy"
)

// TestSlowRecordWriteOutlastingTheLock: a completion whose result record
// takes longer to write than the whole lock (a throttled storage account)
// still completes the message: the lock is renewed while the record is
// written, so the finished task does not run again.
func TestSlowRecordWriteOutlastingTheLock(t *testing.T) {
	t.Parallel()
	client, adm := emulatorClients(t)
	cs := blobConnectionString()
	if !strings.Contains(cs, "http://127.0.0.1:10000") {
		t.Skip("needs Azurite's blob service on 127.0.0.1:10000, behind the fault proxy")
	}
	ctx := ctxT(t)
	// The records go through a proxy that holds back the answer to the
	// task's record write.
	p, err := faultproxy.Start("http://127.0.0.1:10000", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rc := strings.TrimPrefix(resultsParam(t), "results=azblob://devstoreaccount1/")
	blobs, err := container.NewClientFromConnectionString(strings.Replace(cs, "http://127.0.0.1:10000", p.URL(), 1), rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Created up front, so that the record is one (slowed) write.
	if _, err := blobs.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	d, err := sb.New(ctx, client, adm, sb.Options{Queue: freshName(), Create: true, LockDuration: lockDuration, Results: blobs,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := newQueue(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })

	const id = "slow-record"
	if _, err := q.Push(ctx, &jobq.Task{ID: id, Command: "true"}); err != nil {
		t.Fatal(err)
	}
	e := receive(t, q)
	p.Add(faultproxy.Rule{Match: faultproxy.All(faultproxy.Method(http.MethodPut), faultproxy.PathContains("/"+rc+"/"+id)),
		Fault: faultproxy.Slow, Delay: lockDuration + time.Second, Rate: 1})
	if err := e.Complete(ctx); err != nil {
		t.Fatalf("complete with a record write slower than the %v lock: %v (the task would run again)", lockDuration, err)
	}
	if p.Injected(faultproxy.Slow) == 0 {
		t.Fatal("the record write was not slowed")
	}
	// The message is gone (peek sees locked messages too), and the
	// record says it succeeded.
	left, err := q.Admin().Peek(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d messages left in the queue after the completion", len(left))
	}
	r, err := q.Result(ctx, id)
	if err != nil || r.State != driver.ResultSucceeded {
		t.Fatalf("record of %s: %+v, %v; want succeeded", id, r, err)
	}
}
