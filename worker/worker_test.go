package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
	"github.com/jobq/jobq/worker"
)

// openQueue opens a fresh SQLite queue in the test's temporary directory.
func openQueue(t testing.TB) *jobq.Queue {
	t.Helper()
	url := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=test"
	q, err := jobq.OpenWithOptions(context.Background(), url, jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// fastRetry retries a failed task at once, so that tests of retries do not
// wait out the default retry backoff.
var fastRetry = jobq.Backoff{Base: time.Millisecond, Cap: time.Millisecond}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runAndStop runs a worker of q (quiet unless o has a logger) whose
// handler runs handle, stops it once the first task's handler started,
// and returns it with Run's error.
func runAndStop(q *jobq.Queue, o worker.Options, handle func(ctx context.Context) error) (*worker.Worker, error) {
	started := make(chan struct{})
	var once sync.Once
	h := worker.HandlerFunc(func(ctx context.Context, _ *worker.Job) error {
		once.Do(func() { close(started) })
		return handle(ctx)
	})
	if o.Logger == nil {
		o.Logger = quietLog()
	}
	w := worker.New(q, h, o)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	<-started
	w.Stop()
	return w, <-errc
}

func push(t *testing.T, q *jobq.Queue, tasks ...*jobq.Task) {
	t.Helper()
	if _, err := q.PushBatch(context.Background(), tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRunDrainsAndExits(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	for i := range 5 {
		push(t, q, &jobq.Task{Command: fmt.Sprintf("echo %d", i)})
	}
	var ran atomic.Int64
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		ran.Add(1)
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 2, Logger: quietLog(), Poll: 100 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 5 || w.Counts().Done != 5 {
		t.Fatalf("ran %d, done %d; want 5", ran.Load(), w.Counts().Done)
	}
	if n, _ := q.Admin().Size(context.Background()); n != 0 {
		t.Fatalf("queue size %d after the run; want 0", n)
	}
	if w.EndReason() != "queue empty" {
		t.Fatalf("end reason %q", w.EndReason())
	}
}

func TestFailureRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "false", NumRetries: 2, RetryBackoff: fastRetry})
	var ran atomic.Int64
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		ran.Add(1)
		return &worker.TaskError{Err: errors.New("boom"), Detail: "last output"}
	})
	err := worker.Run(context.Background(), q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, MaxConsecutiveFailures: -1})
	if err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 3 {
		t.Fatalf("ran %d times; want 3 (1 + 2 retries)", ran.Load())
	}
	dead, err := q.Admin().DeadLetters(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "boom") || dead[0].Detail != "last output" {
		t.Fatalf("dead letters %+v; want one with reason boom and the detail", dead)
	}
}

func TestMaxConsecutiveFailuresStops(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	for i := range 5 {
		push(t, q, &jobq.Task{Command: fmt.Sprintf("exit %d", i+1)})
	}
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error { return errors.New("fails") })
	// One task at a time: with several running, more may fail before the
	// third failure stops the worker.
	w := worker.New(q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, MaxConsecutiveFailures: 2, Concurrency: 1, Prefetch: -1})
	err := w.Run(context.Background())
	if !errors.Is(err, worker.ErrTooManyFailures) {
		t.Fatalf("Run returned %v; want ErrTooManyFailures", err)
	}
	if c := w.Counts(); c.Failed != 3 {
		t.Fatalf("%d failures before stopping; want 3 (more than 2)", c.Failed)
	}
}

// TestMaxConsecutiveFailuresCountsAttempts: one task retried until the
// streak passes the limit stops the worker with a message that counts
// attempts, not "3 tasks", since only one task ran.
func TestMaxConsecutiveFailuresCountsAttempts(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "exit 1", NumRetries: 5, RetryBackoff: fastRetry})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error { return errors.New("fails") })
	w := worker.New(q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, MaxConsecutiveFailures: 2, Concurrency: 1, Prefetch: -1})
	err := w.Run(context.Background())
	if !errors.Is(err, worker.ErrTooManyFailures) || !strings.Contains(err.Error(), "3 task attempts failed in a row") {
		t.Fatalf("Run returned %v; want ErrTooManyFailures counting 3 task attempts", err)
	}
}

// TestStopRequeuesRunningTask: Stop ends a running task's context, with
// lease renewals on or off (the lease keeper ends it either way), and the
// task is requeued.
func TestStopRequeuesRunningTask(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		o    worker.Options
	}{
		{"heartbeat", worker.Options{Poll: 100 * time.Millisecond}},
		{"no-heartbeat", worker.Options{Poll: 100 * time.Millisecond, DisableHeartbeat: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			push(t, q, &jobq.Task{Command: "sleep 100"})
			w, err := runAndStop(q, tt.o, func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Second):
					return errors.New("Stop did not end the task's context")
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			st, err := q.Admin().Stats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// Requeued may be 2: a receive under way at Stop can claim the task
			// just put back, and the worker puts it back again.
			if st.Ready != 1 || st.InFlight != 0 || w.Counts().Requeued < 1 || w.Counts().Done != 0 {
				t.Fatalf("after Stop: %+v, counts %+v; want the task ready again", st, w.Counts())
			}
		})
	}
}

// TestStopCompletesTaskThatSucceeds: a handler that still succeeds after
// Stop cancelled its context has its task completed, not requeued to run
// again.
func TestStopCompletesTaskThatSucceeds(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "finishes anyway"})
	w, err := runAndStop(q, worker.Options{Poll: 100 * time.Millisecond}, func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := q.Admin().Size(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := w.Counts(); n != 0 || c.Done != 1 || c.Requeued != 0 {
		t.Fatalf("after Stop: queue size %d, counts %+v; want the task completed, none requeued", n, c)
	}
}

func TestDrainFinishesRunningTask(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "a"}, &jobq.Task{Command: "b"})
	started := make(chan struct{})
	release := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		close(started)
		<-release
		return nil
	})
	// One task at a time and none claimed ahead: the other task stays
	// queued (with more slots both could start, and close started twice).
	w := worker.New(q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, Concurrency: 1, Prefetch: -1})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	<-started
	w.Drain()
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c := w.Counts(); c.Done != 1 {
		t.Fatalf("done %d; want 1 (the running task, and no other)", c.Done)
	}
	if n, _ := q.Admin().Size(context.Background()); n != 1 {
		t.Fatalf("queue size %d; want 1 left", n)
	}
}

func TestGateConfigFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    worker.GateConfig
		wantErr []string
	}{
		{name: "defaults", env: nil, want: worker.GateConfig{CacheSize: 128, Timeout: time.Minute, RequeueDelay: 30 * time.Second, MaxNotQualified: 100}},
		{name: "set", env: map[string]string{"JOBQ_GATE_CACHE_SIZE": "4", "JOBQ_GATE_TIMEOUT_S": "5", "JOBQ_GATE_REQUEUE_DELAY_S": "0", "JOBQ_GATE_MAX_NOT_QUALIFIED": "7"},
			want: worker.GateConfig{CacheSize: 4, Timeout: 5 * time.Second, RequeueDelay: 0, RequeueDelaySet: true, MaxNotQualified: 7}},
		{name: "invalid", env: map[string]string{"JOBQ_GATE_CACHE_SIZE": "0", "JOBQ_GATE_TIMEOUT_S": "abc"},
			wantErr: []string{"JOBQ_GATE_CACHE_SIZE", "JOBQ_GATE_TIMEOUT_S"}},
		{name: "negative delay", env: map[string]string{"JOBQ_GATE_REQUEUE_DELAY_S": "-1"}, wantErr: []string{"JOBQ_GATE_REQUEUE_DELAY_S"}},
		// Seconds past a time.Duration's range wrapped around to a
		// negative timeout.
		{name: "overflowing seconds", env: map[string]string{"JOBQ_GATE_TIMEOUT_S": "9223372037", "JOBQ_GATE_REQUEUE_DELAY_S": "99999999999"},
			wantErr: []string{"JOBQ_GATE_TIMEOUT_S", "JOBQ_GATE_REQUEUE_DELAY_S", "out of range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := worker.GateConfigFromEnv(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; want one naming %v", tt.wantErr)
				}
				for _, name := range tt.wantErr {
					if !strings.Contains(err.Error(), name) {
						t.Errorf("error %q does not name %s", err, name)
					}
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func openQueueB(b *testing.B) *jobq.Queue { return openQueue(b) }

func TestStatusLine(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "slow 1"}, &jobq.Task{Command: "slow 2"}, &jobq.Task{Command: "slow 3"})
	var buf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		time.Sleep(250 * time.Millisecond)
		return nil
	})
	opts := worker.Options{Logger: log, Poll: 100 * time.Millisecond, StatusInterval: 100 * time.Millisecond, Concurrency: 1, Prefetch: -1}
	if err := worker.Run(context.Background(), q, h, opts); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	// A line after each of the first two tasks (the third ends the run),
	// none for the ticks in between; the first has the queue's size.
	if n := strings.Count(out, "msg=status"); n < 1 || n > 3 {
		t.Errorf("%d status lines for 3 tasks of 250ms at a 100ms interval; want one per task that ended before the run did:\n%s", n, out)
	}
	if !strings.Contains(out, "queue_size=") || !strings.Contains(out, "rate_per_s=") {
		t.Fatalf("no status line with the queue size and rate in the log:\n%s", out)
	}
}
