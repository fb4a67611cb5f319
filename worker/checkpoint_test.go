package worker_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
	"github.com/jobq/jobq/worker"
)

// countingStore counts the calls a queue makes to its stash.
type countingStore struct {
	stash.Store
	calls atomic.Int64
}

func (s *countingStore) Put(ctx context.Context, data []byte) (stash.Object, error) {
	s.calls.Add(1)
	return s.Store.Put(ctx, data)
}

func (s *countingStore) Get(ctx context.Context, name string, limit int64) ([]byte, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, name, limit)
}

func (s *countingStore) Delete(ctx context.Context, name string) error {
	s.calls.Add(1)
	return s.Store.Delete(ctx, name)
}

func (s *countingStore) Replace(ctx context.Context, name string, data []byte) error {
	s.calls.Add(1)
	return s.Store.(stash.Replacer).Replace(ctx, name, data)
}

type countingOpener struct{ store *countingStore }

func (o countingOpener) OpenStoreURL(context.Context, *url.URL) (stash.Store, error) {
	return o.store, nil
}

// ckptBundle is a queue with a file stash whose calls are counted.
type ckptBundle struct {
	q     *jobq.Queue
	store *countingStore
	dir   string // the stash's directory
}

func setupCheckpoints(t *testing.T) *ckptBundle {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "stash")
	inner, err := stash.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: inner}
	mux := new(stash.URLMux)
	mux.Register("counted", countingOpener{cs})
	url := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=test"
	q, err := jobq.OpenWithOptions(context.Background(), url, jobq.Options{Logger: quietLog(), StashURL: "counted:///", StashMux: mux})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return &ckptBundle{q: q, store: cs, dir: dir}
}

// objects counts the files in the stash's directory.
func (b *ckptBundle) objects(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestCheckpointsNeedAStash: a worker asked for checkpoints on a queue
// without a stash fails at once, saying what to configure.
func TestCheckpointsNeedAStash(t *testing.T) {
	t.Parallel()
	for _, opts := range []worker.Options{{Checkpoints: true}, {CheckpointEvery: time.Minute}} {
		opts.Logger = quietLog()
		err := worker.New(openQueue(t), worker.NewShell(), opts).Run(context.Background())
		if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), "need a stash") || !strings.Contains(err.Error(), "--stash") {
			t.Errorf("Run with %+v = %v; want FailedPrecondition saying checkpoints need a stash", opts, err)
		}
	}
}

// TestCheckpointsCostNothingUnused: with checkpoints on, tasks that write
// no checkpoint make no stash call at all, on their first delivery or
// after.
func TestCheckpointsCostNothingUnused(t *testing.T) {
	t.Parallel()
	b := setupCheckpoints(t)
	var tasks []*jobq.Task
	for i := range 20 {
		tasks = append(tasks, &jobq.Task{Command: "exit 0 # " + string(rune('a'+i))})
	}
	push(t, b.q, tasks...)
	w := worker.New(b.q, worker.NewShell(), worker.Options{Logger: quietLog(), Checkpoints: true, CheckpointEvery: 10 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := w.Counts(); c.Done != 20 {
		t.Fatalf("counts %+v; want 20 done", c)
	}
	if n := b.store.calls.Load(); n != 0 {
		t.Errorf("%d stash calls for 20 first deliveries that wrote no checkpoint; want 0", n)
	}
}

// TestShellCheckpointAtTimeLimit: a shell task stopped at its time limit
// has its checkpoint directory saved before the term signal; its retry
// starts from it, and the checkpoint is deleted when the task ends.
func TestShellCheckpointAtTimeLimit(t *testing.T) {
	t.Parallel()
	b := setupCheckpoints(t)
	out := filepath.Join(t.TempDir(), "out")
	push(t, b.q, &jobq.Task{NumRetries: 1, RetryBackoff: fastRetry, Command: `d=$JOBQ_CHECKPOINT_DIR
if [ -e "$d/state" ]; then echo "resumed from $(cat "$d/state")" > ` + out + `; exit 0; fi
mkdir -p "$d/sub" && echo 42 > "$d/sub/n" && ln -s sub/n "$d/link"
echo half-way > "$d/state"
exec sleep 60`})
	w := worker.New(b.q, &worker.Shell{KillTimeout: 10 * time.Second}, worker.Options{Logger: quietLog(), Checkpoints: true,
		TaskTimeLimit: time.Second, Poll: 50 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil || strings.TrimSpace(string(got)) != "resumed from half-way" {
		t.Fatalf("the retry wrote %q (%v); want it resumed from the state saved at the time limit", got, err)
	}
	if c := w.Counts(); c.Done != 1 || c.Failed != 1 {
		t.Errorf("counts %+v; want a failure at the limit, then a success", c)
	}
	if n := b.objects(t); n != 0 {
		t.Errorf("%d objects in the stash after the task ended; want its checkpoint deleted", n)
	}
}

// TestHandlerCheckpoints: a Go handler saves bytes and a reader; the next
// attempt loads the last save; a save over the size limit fails and keeps
// the previous one; a worker without checkpoints says so.
func TestHandlerCheckpoints(t *testing.T) {
	t.Parallel()
	b := setupCheckpoints(t)
	push(t, b.q, &jobq.Task{Kind: "k", Payload: []byte(`{}`)})
	var (
		mu     sync.Mutex
		loaded []string
		w      *worker.Worker
	)
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		data, ok := job.Checkpoint()
		mu.Lock()
		loaded = append(loaded, string(data))
		mu.Unlock()
		if ok {
			return nil
		}
		if err := job.SaveCheckpoint(ctx, []byte("first")); err != nil {
			return err
		}
		if err := job.SaveCheckpointFrom(ctx, strings.NewReader("second")); err != nil {
			return err
		}
		if err := job.SaveCheckpoint(ctx, bytes.Repeat([]byte("x"), 100)); err == nil || !strings.Contains(err.Error(), "over the limit") {
			return worker.Permanent(errors.New("an oversized save did not fail: " + errString(err)))
		}
		w.Stop() // as a preemption would
		<-ctx.Done()
		return ctx.Err()
	})
	opts := worker.Options{Logger: quietLog(), Checkpoints: true, CheckpointMaxBytes: 50, Concurrency: 1}
	w = worker.New(b.q, h, opts)
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wt := w.WorkTotals(); wt.Saved <= 0 || wt.Lost < 0 || wt.Done < wt.Saved {
		t.Errorf("work totals %+v; want saved work", wt)
	}
	if err := worker.Run(context.Background(), b.q, h, opts); err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 2 || loaded[0] != "" || loaded[1] != "second" {
		t.Fatalf("attempts loaded %q; want nothing, then the last save", loaded)
	}
	if n := b.objects(t); n != 0 {
		t.Errorf("%d objects in the stash after the task ended; want its checkpoint deleted", n)
	}

	plain := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if err := job.SaveCheckpoint(ctx, []byte("x")); !errors.Is(err, worker.ErrNoCheckpoints) {
			return worker.Permanent(errors.New("SaveCheckpoint without checkpoints: " + errString(err)))
		}
		return nil
	})
	q := openQueue(t)
	push(t, q, &jobq.Task{Kind: "k", Payload: []byte(`{}`)})
	w2 := worker.New(q, plain, worker.Options{Logger: quietLog()})
	if err := w2.Run(context.Background()); err != nil || w2.Counts().Done != 1 {
		t.Fatalf("Run = %v, counts %+v; want SaveCheckpoint to fail with ErrNoCheckpoints", err, w2.Counts())
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
