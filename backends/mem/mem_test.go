package mem_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/conformance"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestConformance runs the shared suite on mem drivers built with New (the
// driver-value form), as declared by default and in degraded modes, which
// also tests the portable layer's fallbacks. Each mode's URL serves the
// UnknownParameter check of the URL opener.
func TestConformance(t *testing.T) {
	t.Parallel()
	all := []driver.Feature{driver.DelayedRequeue, driver.DelayedPush, driver.LeaseRenewal, driver.DeadLetter,
		driver.Priority, driver.Peek, driver.ExactCount, driver.Dedup, driver.ConcurrencyLimit, driver.RateLimit,
		driver.Results, driver.Cancel, driver.WorkerRegistry, driver.Pause, driver.BulkActions, driver.Schedules, driver.Groups}
	modes := []struct {
		name, params string
		opts         mem.Options
	}{
		{"native", "", mem.Options{}},
		{"limited", "?max_message_bytes=4096&max_visibility=30s&max_push_batch=7&max_receive_batch=3&max_peek=2",
			mem.Options{MaxMessageBytes: 4096, MaxVisibility: 30 * time.Second, MaxPushBatch: 7, MaxReceiveBatch: 3, MaxPeek: 2}},
		{"unsupported", "", mem.Options{Unsupported: append([]driver.Feature{driver.InPlaceUpdate, driver.Dependencies}, all...)}},
		{"emulated", "", mem.Options{Emulated: all, Unsupported: []driver.Feature{driver.InPlaceUpdate}}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			conformance.Run(t, conformance.Harness{
				Name: "mem " + m.name,
				NewDriver: func(_ context.Context, _ testing.TB, queue string) (driver.Driver, error) {
					opts := m.opts
					opts.Queue = queue
					return mem.New(opts)
				},
				NewQueueURL:     func(testing.TB) string { return "mem://conformance-" + rand.Text() + m.params },
				MaxMessageBytes: m.opts.MaxMessageBytes,
			})
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, wantIn string
	}{
		{"mem://q?bogus=1", "bogus"},
		{"mem://q?max_message_bytes=-1", "max_message_bytes"},
		{"mem://q?max_message_bytes=ten", "max_message_bytes"},
		{"mem://q?max_visibility=soon", "max_visibility"},
		{"mem://q?unsupported=teleport", "teleport"},
		{"mem://q?emulated=in-place-update", "in-place-update"},
		{"mem://q?unsupported=priority&emulated=priority", "both"},
		{"mem://", "names no queue"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			q, err := jobq.Open(t.Context(), tt.url)
			if err == nil {
				_ = q.Close()
				t.Fatalf("Open(%s) succeeded, want an InvalidArgument error", tt.url)
			}
			if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Open(%s) = %v, want InvalidArgument mentioning %q", tt.url, err, tt.wantIn)
			}
		})
	}
}

// TestSharedByName: handles on one name share messages; closing one
// leaves the other working.
func TestSharedByName(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := "mem://shared-" + rand.Text()
	a, err := jobq.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jobq.Open(ctx, name+"?max_message_bytes=100000")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other, err := jobq.Open(ctx, "mem://other-"+rand.Text())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := a.Push(ctx, &jobq.Task{Command: "echo shared"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := other.Admin().Size(ctx); n != 0 {
		t.Errorf("a queue of another name has %d messages", n)
	}
	e, err := b.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
	if err != nil {
		t.Fatalf("the second handle does not see the first one's message: %v", err)
	}
	if err := e.Complete(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReceiveWakesOnPush: a waiting Receive returns a message pushed while
// it waits.
func TestReceiveWakesOnPush(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, err := jobq.Open(ctx, "mem://wake-"+rand.Text())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	got := make(chan error, 1)
	go func() {
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: time.Minute})
		if err == nil {
			err = e.Complete(ctx)
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it start waiting (correct either way)
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo wake"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting receive: %v", err)
	}
}

// TestDefaultVisibilityClamped: Receive without a visibility takes the
// default lease, shortened to the backend's maximum when that is less.
func TestDefaultVisibilityClamped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, err := jobq.Open(ctx, "mem://clamp-"+rand.Text()+"?max_visibility=30s")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo clamp"}); err != nil {
		t.Fatal(err)
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{})
	if err != nil {
		t.Fatalf("receive with the default visibility on a backend limited to 30s: %v", err)
	}
	if left := time.Until(e.Expiry()); left > 30*time.Second {
		t.Errorf("lease runs %v more, want at most the 30s maximum", left)
	}
	if err := e.Complete(ctx); err != nil {
		t.Fatal(err)
	}
}
