package azqueue_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/stash/azblob"
	"github.com/jobq/jobq/tools/testkit/faultproxy"
)

// TestSlowRecordWriteOutlastingTheLease: a completion whose result record
// takes longer to write than the whole lease (a throttled storage
// account) still deletes the message: the lease is renewed while the
// record is written, so the finished task does not run again.
func TestSlowRecordWriteOutlastingTheLease(t *testing.T) {
	t.Parallel()
	if !strings.Contains(connStr, "127.0.0.1:10001") {
		t.Skip("needs Azurite: the fault proxy forwards to its blob service on 127.0.0.1:10000")
	}
	ctx := t.Context()
	name := queueName(newQueueURL(t))
	rc := name + azq.ResultsSuffix
	// The records go through a proxy that holds back the answer to the
	// task's record write; the queue is reached directly.
	p, err := faultproxy.Start("http://127.0.0.1:10000", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	blobs, err := container.NewClientFromConnectionString(strings.Replace(azblob.DevelopmentConnectionString,
		"http://127.0.0.1:10000", p.URL(), 1), rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Created up front, so that the record is one (slowed) write.
	if _, err := blobs.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}
	svc, err := azqueue.NewServiceClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := azq.New(ctx, svc, azq.Options{Queue: name, Results: blobs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(d, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })

	const id, lease = "slow-record", 3 * time.Second
	if _, err := q.Push(ctx, &jobq.Task{ID: id, Command: "true"}); err != nil {
		t.Fatal(err)
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: lease, Wait: 10 * time.Second})
	if err != nil || e == nil {
		t.Fatalf("receive: %v, %v", e, err)
	}
	p.Add(faultproxy.Rule{Match: faultproxy.All(faultproxy.Method(http.MethodPut), faultproxy.PathContains("/"+rc+"/"+id)),
		Fault: faultproxy.Slow, Delay: lease + time.Second, Rate: 1})
	if err := e.Complete(ctx); err != nil {
		t.Fatalf("complete with a record write slower than the %v lease: %v (the task would run again)", lease, err)
	}
	if n := p.Injected(faultproxy.Slow); n == 0 {
		t.Fatal("the record write was not slowed")
	}
	// The message is gone (not merely hidden), and the record says so.
	props, err := svc.NewQueueClient(name).GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := *props.ApproximateMessagesCount; n != 0 {
		again, _ := q.Receive(ctx, jobq.ReceiveOptions{Wait: time.Second})
		t.Fatalf("%d messages left in the queue after the completion; received again: %v", n, again != nil)
	}
	r, err := q.Result(ctx, id)
	if err != nil || r.State != driver.ResultSucceeded {
		t.Fatalf("record of %s: %+v, %v; want succeeded", id, r, err)
	}
}
