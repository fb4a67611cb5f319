package jobq_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// readCounter is a backend's own driver that counts the task IDs whose
// records GetResults reads. It keeps the interfaces a wait uses: Driver,
// ResultStore and ResultWaiter.
type readCounter struct {
	driver.Driver
	driver.ResultStore
	driver.ResultWaiter
	read *atomic.Int64
}

// GetResults counts ids, then reads their records.
func (r readCounter) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	r.read.Add(int64(len(ids)))
	return r.ResultStore.GetResults(ctx, ids)
}

// readCountingOpener opens a queue through the backend's registered
// opener and wraps its driver in a readCounter.
type readCountingOpener struct {
	inner driver.Opener
	read  *atomic.Int64
}

func (o readCountingOpener) Capabilities() driver.Capabilities { return o.inner.Capabilities() }

func (o readCountingOpener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	d, err := o.inner.Open(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	rs, isStore := d.(driver.ResultStore)
	rw, isWaiter := d.(driver.ResultWaiter)
	if !isStore || !isWaiter {
		_ = d.Close()
		return nil, fmt.Errorf("%s: the driver is not a ResultStore (%v) and ResultWaiter (%v)", u.Scheme, isStore, isWaiter)
	}
	return readCounter{Driver: d, ResultStore: rs, ResultWaiter: rw, read: o.read}, nil
}

// TestWaitReadsBoundedWhileTasksEndOneByOne: on each engine, a wait on many tasks that end
// one after another, each waking it, reads a bounded number of records
// per task, not every pending task's record at every end (work that grows
// with the square of the number of tasks).
func TestWaitReadsBoundedWhileTasksEndOneByOne(t *testing.T) {
	t.Parallel()
	const n = 3000
	// Reading every pending record at each end costs up to n/2 reads per
	// task (on Postgres and Redis, whose wakes follow each commit: 100 to
	// 400 at this size); a wait that paces its reads costs a few to about
	// 15 at any size, as many as fit in a tenth of the time the ends take.
	const maxReadsPerTask = 50
	for engine, u := range engines.URLs(t, "wait-reads") {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			parsed, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			inner, ok := jobq.DefaultURLMux().Opener(parsed.Scheme)
			if !ok {
				t.Fatalf("no backend is registered for scheme %q", parsed.Scheme)
			}
			var read atomic.Int64
			mux := new(jobq.URLMux)
			if err := mux.Register(parsed.Scheme, readCountingOpener{inner: inner, read: &read}); err != nil {
				t.Fatal(err)
			}
			q, err := mux.Open(ctx, u, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Skipf("no %s engine: %v", engine, err)
			}
			t.Cleanup(func() {
				_, _ = q.Admin().Clear(context.Background())
				_ = q.Close()
			})
			tasks := make([]*jobq.Task, n)
			for i := range tasks {
				tasks[i] = &jobq.Task{Command: fmt.Sprintf("echo %d", i)}
			}
			res, err := q.PushBatch(ctx, tasks, jobq.PushOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, n)
			for i, r := range res {
				ids[i] = r.ID
			}
			var reported atomic.Int64
			done := make(chan error, 1)
			go func() {
				done <- q.WaitFunc(ctx, ids, jobq.WaitOptions{}, func(*jobq.Result) error {
					reported.Add(1)
					return nil
				})
			}()
			for range n {
				e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Complete(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := reported.Load(); got != n {
				t.Fatalf("the wait reported %d tasks; want %d", got, n)
			}
			if got := read.Load(); got > maxReadsPerTask*n {
				t.Errorf("the wait read %d records for %d tasks (%.0f a task); want at most %d a task", got, n, float64(got)/n, maxReadsPerTask)
			}
			t.Logf("%s: %d records read for %d tasks", engine, read.Load(), n)
		})
	}
}
