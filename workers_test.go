package jobq_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// noRegistry is a driver that declares the worker registry but does not
// implement driver.WorkerStore.
type noRegistry struct{ driver.Driver }

// TestWorkersDeclaredButNotImplemented: the portable layer fails with
// Unimplemented rather than panicking.
func TestWorkersDeclaredButNotImplemented(t *testing.T) {
	t.Parallel()
	d, err := mem.New(mem.Options{Queue: "workers-declared-only"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(noRegistry{d}, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Admin().Workers(t.Context(), jobq.WorkersOptions{}); !errors.Is(err, errcode.Unimplemented) {
		t.Errorf("Workers: %v, want Unimplemented", err)
	}
	if err := hooks.AnnounceWorker(t.Context(), q, &jobq.WorkerInfo{ID: "w"}); !errors.Is(err, errcode.Unimplemented) {
		t.Errorf("AnnounceWorker: %v, want Unimplemented", err)
	}
}

// TestWorkersOrderAndDamagedRecords: live workers come before vanished
// ones, each group by start time; a record the portable layer cannot read
// is skipped.
func TestWorkersOrderAndDamagedRecords(t *testing.T) {
	t.Parallel()
	d, err := mem.New(mem.Options{Queue: "workers-order"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(d, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	now := time.Now()
	for _, w := range []*jobq.WorkerInfo{
		{ID: "gone-early", Started: now.Add(-3 * time.Hour), Heartbeat: now.Add(-time.Hour)},
		{ID: "live-late", Started: now.Add(-time.Minute)},
		{ID: "live-early", Started: now.Add(-2 * time.Hour)},
	} {
		if err := hooks.AnnounceWorker(ctx, q, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.PutWorker(ctx, &driver.WorkerRecord{ID: "damaged", Heartbeat: now, Data: []byte("not json")}); err != nil {
		t.Fatal(err)
	}
	ws, err := q.Admin().Workers(ctx, jobq.WorkersOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range ws {
		got = append(got, w.ID+":"+string(w.State))
	}
	want := []string{"live-early:live", "live-late:live", "gone-early:vanished"}
	if !slices.Equal(got, want) {
		t.Errorf("Workers = %v, want %v", got, want)
	}
}
