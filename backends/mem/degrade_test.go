package mem_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// These tests exercise the portable layer's capability logic one feature at
// a time, using mem's unsupported= and emulated= parameters.

// warnLog records the degradation warnings of one queue.
type warnLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (w *warnLog) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnLog) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, r)
	return nil
}
func (w *warnLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnLog) WithGroup(string) slog.Handler      { return w }

// degraded returns the "instead" text of each degradation warning for f.
func (w *warnLog) degraded(f driver.Feature) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.recs {
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if r.Level == slog.LevelWarn && attrs["feature"] == string(f) {
			out = append(out, attrs["instead"])
		}
	}
	return out
}

func openLogged(t *testing.T, url string) (*jobq.Queue, *warnLog) {
	t.Helper()
	w := &warnLog{}
	q, err := jobq.OpenWithOptions(t.Context(), url, jobq.Options{Logger: slog.New(w)})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, w
}

// use makes the portable layer use feature f once on q.
func use(t *testing.T, q *jobq.Queue, f driver.Feature) error {
	t.Helper()
	ctx := t.Context()
	receive := func() *jobq.Envelope {
		if _, err := q.Push(ctx, &jobq.Task{Command: "echo " + time.Now().String(), NumRetries: 3}); err != nil {
			t.Fatalf("push: %v", err)
		}
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		return e
	}
	switch f {
	case driver.Priority:
		_, err := q.Push(ctx, &jobq.Task{Command: "echo prio", Priority: 5})
		return err
	case driver.DelayedPush:
		_, err := q.Push(ctx, &jobq.Task{Command: "echo later", NotBefore: time.Now().Add(time.Hour)})
		return err
	case driver.DelayedRequeue:
		return receive().Requeue(ctx, time.Minute)
	case driver.LeaseRenewal:
		return receive().Renew(ctx, 0)
	case driver.DeadLetter:
		return receive().DeadLetter(ctx, "reason", "")
	case driver.Peek:
		_, err := q.Admin().Peek(ctx, 1)
		return err
	case driver.InPlaceUpdate:
		_, err := receive().Fail(ctx, errors.New("boom"), "")
		return err
	case driver.WorkerRegistry:
		_, err := q.Admin().Workers(ctx, jobq.WorkersOptions{})
		return err
	}
	t.Fatalf("no way to use %s", f)
	return nil
}

var usable = []driver.Feature{
	driver.Priority, driver.DelayedPush, driver.DelayedRequeue, driver.LeaseRenewal,
	driver.DeadLetter, driver.Peek, driver.InPlaceUpdate, driver.WorkerRegistry,
}

func TestUnsupportedFeature(t *testing.T) {
	t.Parallel()
	// The portable layer degrades these itself; the rest must fail.
	safe := map[driver.Feature]bool{driver.Priority: true, driver.InPlaceUpdate: true}
	for _, f := range usable {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			q, w := openLogged(t, "mem://unsupported-"+string(f)+"?unsupported="+string(f))
			declared := q.Capabilities().Features[f].Fallback
			for range 3 {
				err := use(t, q, f)
				switch {
				case safe[f] && err != nil:
					t.Fatalf("unsupported %s has a safe fallback, but using it failed: %v", f, err)
				case !safe[f] && !errors.Is(err, errcode.Unimplemented):
					t.Fatalf("using unsupported %s: got %v, want an Unimplemented error", f, err)
				case !safe[f] && !strings.Contains(err.Error(), string(f)):
					t.Errorf("the Unimplemented error does not name %s: %v", f, err)
				}
			}
			got := w.degraded(f)
			switch {
			case !safe[f] && len(got) != 0:
				t.Errorf("a refused %s also warned: %q", f, got)
			case safe[f] && (len(got) != 1 || got[0] != declared):
				t.Errorf("three uses of degraded %s warned %q, want once with the declared %q", f, got, declared)
			}
		})
	}
}

func TestEmulatedFeature(t *testing.T) {
	t.Parallel()
	for _, f := range usable {
		if f == driver.InPlaceUpdate {
			continue // mem cannot emulate it
		}
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			q, w := openLogged(t, "mem://emulated-"+string(f)+"?emulated="+string(f))
			for range 3 {
				if err := use(t, q, f); err != nil {
					t.Fatalf("using emulated %s: %v", f, err)
				}
			}
			declared := q.Capabilities().Features[f].Fallback
			if got := w.degraded(f); len(got) != 1 || got[0] != declared {
				t.Errorf("three uses of emulated %s warned %q, want once with %q", f, got, declared)
			}
		})
	}
}

// TestNativeFeatureNoWarning: using native features logs nothing.
func TestNativeFeatureNoWarning(t *testing.T) {
	t.Parallel()
	q, w := openLogged(t, "mem://native-no-warning")
	for _, f := range usable {
		if err := use(t, q, f); err != nil {
			t.Fatalf("using native %s: %v", f, err)
		}
		if got := w.degraded(f); len(got) != 0 {
			t.Errorf("native %s warned: %q", f, got)
		}
	}
}

// TestUnsupportedEmulatedDedup: without native dedup the same task is
// stored twice (unsupported) or dropped without a report (emulated).
func TestUnsupportedEmulatedDedup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		param    string
		wantSize int64
		wantFlag bool
	}{
		{"", 1, true},
		{"?unsupported=dedup", 2, false},
		{"?emulated=dedup", 1, false},
	}
	for _, tt := range tests {
		t.Run("dedup"+tt.param, func(t *testing.T) {
			t.Parallel()
			q, _ := openLogged(t, "mem://dedup-test"+strings.ReplaceAll(tt.param, "?", "-")+tt.param)
			var last jobq.PushResult
			for range 2 {
				r, err := q.Push(t.Context(), &jobq.Task{Command: "echo same"})
				if err != nil {
					t.Fatal(err)
				}
				last = r
			}
			if last.Duplicate != tt.wantFlag {
				t.Errorf("second push Duplicate = %v, want %v", last.Duplicate, tt.wantFlag)
			}
			if n, err := q.Admin().Size(t.Context()); err != nil || n != tt.wantSize {
				t.Errorf("size %d (error %v), want %d", n, err, tt.wantSize)
			}
		})
	}
}
