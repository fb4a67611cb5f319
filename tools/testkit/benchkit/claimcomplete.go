package benchkit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// DriverClaimComplete measures the driver d alone, without the portable
// layer or the worker: it pushes b.N messages in Push calls of at most chunk
// messages, then Handlers goroutines each receive up to Handlers messages
// and complete them in one call, and it reports tasks/s.
func DriverClaimComplete(b *testing.B, d driver.Driver, chunk int) {
	driverClaimComplete(b, d, chunk, func(ctx context.Context, got []*driver.Received) []error {
		return d.Complete(ctx, driver.Completions(leasesOf(got)...))
	})
}

// DriverClaimCompleteRecords is DriverClaimComplete with a result record
// of recordBytes stored with each completion (CompleteParams.Result), as
// the portable layer stores them when the queue keeps records.
func DriverClaimCompleteRecords(b *testing.B, d driver.Driver, chunk int) {
	if d.Capabilities().Level(driver.Results) != driver.Native {
		b.Skip("the driver stores no result records with settlements")
	}
	data := make([]byte, recordBytes)
	for i := range data {
		data[i] = 'x'
	}
	driverClaimComplete(b, d, chunk, func(ctx context.Context, got []*driver.Received) []error {
		now := time.Now()
		reqs := make([]driver.CompleteParams, len(got))
		for i, r := range got {
			reqs[i] = driver.CompleteParams{Lease: r.Lease, Result: &driver.ResultRecord{ID: r.ID, State: driver.ResultSucceeded, UpdatedAt: now, ExpiresAt: now.Add(7 * 24 * time.Hour), Data: data}}
		}
		return d.Complete(ctx, reqs)
	})
}

// recordBytes is about the size of a no-op task's encoded record (state,
// times, worker, host, one attempt).
const recordBytes = 300

func leasesOf(got []*driver.Received) []driver.Lease {
	leases := make([]driver.Lease, len(got))
	for i, r := range got {
		leases[i] = r.Lease
	}
	return leases
}

func driverClaimComplete(b *testing.B, d driver.Driver, chunk int, complete func(context.Context, []*driver.Received) []error) {
	ctx := context.Background()
	msgs := make([]*driver.Message, b.N)
	for i := range msgs {
		msgs[i] = &driver.Message{ID: fmt.Sprint(i), Body: []byte(`{"version": 1, "kwargs": "{}"}`)}
	}
	for lo := 0; lo < len(msgs); lo += chunk {
		if _, err := d.Push(ctx, msgs[lo:min(lo+chunk, len(msgs))]); err != nil {
			b.Fatal(err)
		}
	}
	Claimers(b, "completed", func() (int64, error) {
		got, err := d.Receive(ctx, driver.ReceiveParams{Max: Handlers, Visibility: time.Minute})
		if err != nil || len(got) == 0 {
			return 0, err
		}
		if errs := complete(ctx, got); errs != nil {
			return 0, fmt.Errorf("complete: %v", errs)
		}
		return int64(len(got)), nil
	})
}

// QueueClaimComplete is DriverClaimComplete through the portable API on q,
// without the worker: after pushing b.N tasks, Handlers goroutines each
// ReceiveBatch up to Handlers tasks and Complete each concurrently (the
// portable layer batches the completions), and it reports tasks/s.
func QueueClaimComplete(b *testing.B, q *jobq.Queue) {
	ctx := context.Background()
	if _, err := q.PushBatch(ctx, Tasks(b.N), jobq.PushOptions{}); err != nil {
		b.Fatal(err)
	}
	Claimers(b, "completed", func() (int64, error) {
		envs, err := q.ReceiveBatch(ctx, Handlers, jobq.ReceiveOptions{Visibility: time.Minute})
		if err != nil || len(envs) == 0 {
			return 0, err
		}
		var wg sync.WaitGroup
		for _, e := range envs {
			wg.Go(func() {
				if err := e.Complete(ctx); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		return int64(len(envs)), nil
	})
}
