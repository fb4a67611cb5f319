package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/mem"
)

func TestRunningRegistry(t *testing.T) {
	t.Parallel()
	var r running
	a := &jobq.Envelope{Task: &jobq.Task{ID: "a"}}
	a2 := &jobq.Envelope{Task: &jobq.Task{ID: "a"}} // the same task delivered twice
	b := &jobq.Envelope{Task: &jobq.Task{ID: "b"}}
	tracked := func(env *jobq.Envelope) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(context.Canceled) })
		r.track(env, cancel)
		return ctx
	}
	ctxA, ctxA2, ctxB := tracked(a), tracked(a2), tracked(b)
	ids, _ := r.ids()
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("ids %v; want a, b", ids)
	}
	if reached := r.stop([]string{"a", "unknown"}); !slices.Equal(reached, []string{"a", "a"}) {
		t.Fatalf("stop reached %v; want both deliveries of a", reached)
	}
	for _, ctx := range []context.Context{ctxA, ctxA2} {
		if !errors.Is(context.Cause(ctx), ErrCancelled) {
			t.Fatalf("cause %v; want ErrCancelled", context.Cause(ctx))
		}
	}
	if ctxB.Err() != nil {
		t.Fatal("stopping a stopped b too")
	}
	for _, env := range []*jobq.Envelope{a, a2, b} {
		r.untrack(env)
	}
	if ids, _ := r.ids(); len(ids) != 0 || len(r.stop([]string{"a"})) != 0 {
		t.Fatalf("ids %v after untracking all; want none", ids)
	}
}

func TestStoppedBy(t *testing.T) {
	t.Parallel()
	limit := &timeLimitError{limit: 2 * time.Hour}
	other := errors.New("disk full")
	for _, tc := range []struct {
		name       string
		err, cause error
		want       string // "" for nil
	}{
		{"success stays", nil, limit, ""},
		{"no limit", other, context.Canceled, "disk full"},
		{"ctx error becomes the limit", context.DeadlineExceeded, limit, "time limit 2h0m0s exceeded"},
		{"wrapped ctx error", fmt.Errorf("query: %w", context.Canceled), limit, "time limit 2h0m0s exceeded"},
		{"already says so", fmt.Errorf("task stopped: %w", limit), limit, "task stopped: time limit 2h0m0s exceeded"},
		{"another error", other, limit, "time limit 2h0m0s exceeded: disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := stoppedBy(tc.err, tc.cause)
			if (got == nil) != (tc.want == "") || got != nil && got.Error() != tc.want {
				t.Fatalf("stoppedBy = %v; want %q", got, tc.want)
			}
			if got != nil && errors.Is(tc.cause, ErrTimeLimit) && !errors.Is(got, ErrTimeLimit) {
				t.Fatalf("stoppedBy = %v does not match ErrTimeLimit", got)
			}
		})
	}
}

func TestPurgeWaitJitter(t *testing.T) {
	t.Parallel()
	for range 1000 {
		if d := purgeWait(purgeEvery); d < purgeEvery/2 || d >= purgeEvery*3/2 {
			t.Fatalf("purge wait %v outside [%v, %v)", d, purgeEvery/2, purgeEvery*3/2)
		}
	}
}

// TestWatchCancels: the worker tracks its running tasks for cancel
// requests only where the backend keeps them and CancelPoll allows.
func TestWatchCancels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		url    string
		poll   time.Duration
		watch  bool
		purges bool
	}{
		{"results kept, default poll", "mem://watch-default", 0, true, true},
		{"poll disabled", "mem://watch-disabled", -1, false, true},
		{"cancel emulated", "mem://watch-emulated?emulated=cancel", 0, true, true},
		{"no results", "mem://watch-none?unsupported=results,cancel", 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := jobq.OpenWithOptions(context.Background(), tc.url, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			w := New(q, HandlerFunc(func(context.Context, *Job) error { return nil }), Options{CancelPoll: tc.poll})
			if w.watchCancels != tc.watch || w.purgesResults() != tc.purges {
				t.Fatalf("watches cancels %t, purges %t; want %t, %t", w.watchCancels, w.purgesResults(), tc.watch, tc.purges)
			}
		})
	}
}
