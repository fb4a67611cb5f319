package worker_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker"
)

// lookupCounter is a backend's driver that counts its records lookups
// (GetResults). It keeps the interfaces a worker and a cancel need:
// Driver, ResultStore and TaskRemover.
type lookupCounter struct {
	driver.Driver
	driver.ResultStore
	driver.TaskRemover
	lookups *atomic.Int64
}

func (c lookupCounter) GetResults(ctx context.Context, ids []string) ([]*driver.ResultRecord, error) {
	c.lookups.Add(1)
	return c.ResultStore.GetResults(ctx, ids)
}

// lookupCountingOpener opens through the registered opener of a scheme and
// wraps the driver in a lookupCounter.
type lookupCountingOpener struct {
	inner   driver.Opener
	lookups *atomic.Int64
}

func (o lookupCountingOpener) Capabilities() driver.Capabilities { return o.inner.Capabilities() }

func (o lookupCountingOpener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	d, err := o.inner.Open(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	rs, _ := d.(driver.ResultStore)
	tr, _ := d.(driver.TaskRemover)
	return lookupCounter{Driver: d, ResultStore: rs, TaskRemover: tr, lookups: o.lookups}, nil
}

// TestReceiveMakesNoRecordsLookup: where the backend removes queued tasks
// by ID (Cancel native), receiving tasks costs no records round trip: the
// worker looks the received tasks' cancel requests up only where cancel
// is emulated (the control case, which must look them up to drop a
// cancelled task).
func TestReceiveMakesNoRecordsLookup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		rawURL  func(t *testing.T) string
		lookups bool
	}{
		{"sqlite native", func(t *testing.T) string {
			return "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=main"
		}, false},
		{"mem native", func(t *testing.T) string { return fmt.Sprintf("mem://receive-lookup-native-%d", time.Now().UnixNano()) }, false},
		{"mem emulated", func(t *testing.T) string {
			return fmt.Sprintf("mem://receive-lookup-emulated-%d?emulated=cancel", time.Now().UnixNano())
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rawURL := tc.rawURL(t)
			u, err := url.Parse(rawURL)
			if err != nil {
				t.Fatal(err)
			}
			inner, ok := jobq.DefaultURLMux().Opener(u.Scheme)
			if !ok {
				t.Fatalf("no backend for %q", u.Scheme)
			}
			var lookups atomic.Int64
			mux := new(jobq.URLMux)
			mux.Register(u.Scheme, lookupCountingOpener{inner: inner, lookups: &lookups})
			q, err := mux.Open(context.Background(), rawURL, jobq.Options{Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			const tasks = 5
			for i := range tasks {
				pushOne(t, q, &jobq.Task{Command: fmt.Sprintf("echo %d", i)})
			}
			lookups.Store(0)
			var ran atomic.Int64
			h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
				ran.Add(1)
				return nil
			})
			// One task per receive, as with -n 1.
			w := worker.New(q, h, worker.Options{Logger: quietLog(), Concurrency: 1, Prefetch: -1, Poll: 100 * time.Millisecond})
			if err := w.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if ran.Load() != tasks {
				t.Fatalf("ran %d tasks; want %d", ran.Load(), tasks)
			}
			n := lookups.Load()
			if tc.lookups && n < tasks {
				t.Fatalf("cancel emulated: %d records lookups for %d receives; want one per receive (the control: the counter counts)", n, tasks)
			}
			if !tc.lookups && n != 0 {
				t.Fatalf("cancel native: the worker made %d records lookups receiving %d tasks; want none", n, tasks)
			}
		})
	}
}
