package worker

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
)

func TestCPUPercent(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration, cpu time.Duration) usage { return usage{at: t0.Add(d), cpu: cpu} }
	tests := []struct {
		name      string
		prev, cur usage
		ncpu      int
		want      float64
	}{
		{"first reading", usage{}, at(time.Second, 10*time.Millisecond), 2, 0},
		{"one tick over 7.5 ms is not 134%", at(0, 0), at(7500*time.Microsecond, 10*time.Millisecond), 2, 0},
		{"half a core over 10 s", at(0, time.Second), at(10*time.Second, 6*time.Second), 2, 50},
		{"two busy cores", at(0, 0), at(time.Second, 2*time.Second), 2, 200},
		{"capped at the cores there are", at(0, 0), at(time.Second, 3*time.Second), 2, 200},
		{"clock went backwards", at(time.Second, 0), at(0, time.Second), 2, 0},
		{"CPU time went backwards", at(0, time.Second), at(2*time.Second, 0), 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := cpuPercent(tt.prev, tt.cur, tt.ncpu); got != tt.want {
				t.Errorf("cpuPercent = %v, want %v", got, tt.want)
			}
		})
	}
}

// slowAnnounce is a mem driver whose worker records wait for release.
type slowAnnounce struct {
	*mem.Driver
	release  chan struct{}
	returned atomic.Int32 // PutWorker calls that have returned
}

func (d *slowAnnounce) PutWorker(ctx context.Context, rec *driver.WorkerRecord) error {
	defer d.returned.Add(1)
	select {
	case <-d.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return d.Driver.PutWorker(ctx, rec)
}

// TestFirstTaskDoesNotWaitForTheAnnouncement: a worker runs its first task
// while its announcement in the registry is still being written, and
// withdraws after it was written.
func TestFirstTaskDoesNotWaitForTheAnnouncement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, err := mem.New(mem.Options{Queue: "announce-" + rand.Text()})
	if err != nil {
		t.Fatal(err)
	}
	d := &slowAnnounce{Driver: m, release: make(chan struct{})}
	q, err := jobq.New(d, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo first"}); err != nil {
		t.Fatal(err)
	}
	announcing := make(chan int32, 1)
	w := New(q, HandlerFunc(func(context.Context, *Job) error {
		announcing <- d.returned.Load()
		return nil
	}), Options{Logger: slog.New(slog.DiscardHandler), Concurrency: 1})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if n := <-announcing; n != 0 {
		t.Errorf("the first task ran after %d registry writes returned; want it to run while the announcement is held back", n)
	}
	close(d.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ws, err := q.Admin().Workers(ctx, jobq.WorkersOptions{Withdrawn: true})
	if err != nil || len(ws) != 1 || ws[0].State != jobq.WorkerWithdrawn {
		t.Fatalf("after Run, the registry holds %+v (%v); want the worker, withdrawn", ws, err)
	}
}
