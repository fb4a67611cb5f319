package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
	"github.com/jobq/jobq/worker"
)

// TestReceiversShareSlots: several receivers never run more tasks at once
// than Concurrency, every task runs exactly once, and the worker ends once,
// on an empty queue.
func TestReceiversShareSlots(t *testing.T) {
	t.Parallel()
	tests := []struct{ concurrency, receivers int }{
		{1, 0}, {3, 0}, {4, 4}, {8, 0}, {5, 2}, {2, 9},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("concurrency=%d/receivers=%d", tt.concurrency, tt.receivers), func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			const n = 60
			tasks := make([]*jobq.Task, n)
			for i := range tasks {
				tasks[i] = &jobq.Task{Command: fmt.Sprintf("t %d", i)}
			}
			push(t, q, tasks...)
			var mu sync.Mutex
			running, peak := 0, 0
			seen := map[string]int{}
			h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
				mu.Lock()
				running++
				peak = max(peak, running)
				seen[job.Task.Command]++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				running--
				mu.Unlock()
				return nil
			})
			var logs syncbuf.Buffer
			w := worker.New(q, h, worker.Options{Concurrency: tt.concurrency, Receivers: tt.receivers,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), Poll: 50 * time.Millisecond})
			if err := w.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if peak > tt.concurrency {
				t.Errorf("%d tasks ran at once; Concurrency is %d", peak, tt.concurrency)
			}
			if len(seen) != n {
				t.Errorf("ran %d distinct tasks; want %d", len(seen), n)
			}
			for cmd, k := range seen {
				if k != 1 {
					t.Errorf("task %q ran %d times", cmd, k)
				}
			}
			if w.EndReason() != "queue empty" {
				t.Errorf("end reason %q; want queue empty", w.EndReason())
			}
			if k := strings.Count(logs.String(), `msg="worker finished"`); k != 1 {
				t.Errorf("%d \"worker finished\" lines; want 1", k)
			}
		})
	}
}

// TestReceiversRespectMaxTasks: receivers together never take more than
// MaxTasks, whatever their number.
func TestReceiversRespectMaxTasks(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 3, 7, 16} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			const n = 40
			tasks := make([]*jobq.Task, n)
			for i := range tasks {
				tasks[i] = &jobq.Task{Command: fmt.Sprintf("t %d", i)}
			}
			push(t, q, tasks...)
			var ran atomic.Int64
			h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
				ran.Add(1)
				return nil
			})
			w := worker.New(q, h, worker.Options{Concurrency: 8, Receivers: 4, MaxTasks: limit, Logger: quietLog(), Poll: 50 * time.Millisecond})
			if err := w.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := ran.Load(); got != int64(limit) {
				t.Fatalf("ran %d tasks; MaxTasks is %d", got, limit)
			}
			if n, _ := q.Admin().Size(context.Background()); n != int64(40-limit) {
				t.Fatalf("queue size %d after the run; want %d (none taken beyond the limit)", n, 40-limit)
			}
			if w.EndReason() != "task limit reached" {
				t.Fatalf("end reason %q", w.EndReason())
			}
		})
	}
}

// TestReceiversFollowChain: each task pushes the next before it returns, so
// the queue is often empty to one receiver while another holds the next
// task; the worker must not end before the chain does.
func TestReceiversFollowChain(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	const links, width = 30, 3
	for i := range width {
		push(t, q, &jobq.Task{Command: fmt.Sprintf("%d 0", i)})
	}
	var ran atomic.Int64
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		ran.Add(1)
		var chain, link int
		if _, err := fmt.Sscanf(job.Task.Command, "%d %d", &chain, &link); err != nil {
			return err
		}
		if link+1 < links {
			_, err := q.Push(ctx, &jobq.Task{Command: fmt.Sprintf("%d %d", chain, link+1)})
			return err
		}
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 8, Logger: quietLog(), Poll: 20 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ran.Load(); got != links*width {
		t.Fatalf("ran %d tasks; want %d: the worker ended before the chains did", got, links*width)
	}
	if w.EndReason() != "queue empty" {
		t.Fatalf("end reason %q", w.EndReason())
	}
}

// TestReceiversWaitPolls: with Wait, receivers keep polling an empty queue
// and pick up a task pushed later.
func TestReceiversWaitPolls(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	got := make(chan string, 1)
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		got <- job.Task.Command
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 8, Wait: true, Logger: quietLog(), Poll: 20 * time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	// Let the receivers see the empty queue a few times first.
	time.Sleep(150 * time.Millisecond)
	push(t, q, &jobq.Task{Command: "late"})
	if cmd := <-got; cmd != "late" {
		t.Fatalf("handled %q", cmd)
	}
	// Drain once the task is settled: the drain cancels the receives in
	// flight, and on SQLite a receive cancelled just as its BEGIN succeeds
	// can leave the write connection inside a transaction, failing the
	// next write (a backend bug, reported; not this test's subject).
	for deadline := time.Now().Add(10 * time.Second); w.Counts().Done == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	w.Drain()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c := w.Counts(); c.Done != 1 {
		t.Fatalf("done %d; want 1", c.Done)
	}
	if r := w.EndReason(); !strings.HasPrefix(r, "drained") {
		t.Fatalf("end reason %q; want drained", r)
	}
}

// slowClaimScheme opens SQLite queues whose receives hold claimed tasks for
// a while before returning them, as a reply still in transit does: another
// receiver's empty receive then lands while this one holds a task it has
// not started. rttScheme adds a network's round trip to every receive, for
// the benchmarks.
const (
	slowClaimScheme = "sqlite-slowclaim"
	rttScheme       = "sqlite-rtt"
)

func init() {
	if err := jobq.Register(slowClaimScheme, wrapSQLite(func(d driver.Driver) driver.Driver { return slowReceives{d, 150 * time.Millisecond, false} })); err != nil {
		panic(err)
	}
	if err := jobq.Register(rttScheme, wrapSQLite(func(d driver.Driver) driver.Driver { return slowReceives{d, time.Millisecond, true} })); err != nil {
		panic(err)
	}
}

// wrappedSQLite opens SQLite queues whose driver wrap wraps, for the test
// schemes here that make an engine slower or watch what the worker asks of
// it.
type wrappedSQLite struct {
	sqlite.URLOpener
	wrap func(driver.Driver) driver.Driver
}

// openWrapped opens a fresh queue of one of the wrapped schemes, closed
// after the test.
func openWrapped(t *testing.T, scheme string) *jobq.Queue {
	t.Helper()
	u := scheme + "://" + filepath.Join(t.TempDir(), "q.db") + "?queue=test"
	q, err := jobq.OpenWithOptions(context.Background(), u, jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func wrapSQLite(wrap func(driver.Driver) driver.Driver) wrappedSQLite {
	return wrappedSQLite{wrap: wrap}
}

func (o wrappedSQLite) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	d, err := o.URLOpener.Open(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	return o.wrap(d), nil
}

// slowReceives returns receives hold later: every receive when always,
// else only those that claimed something.
type slowReceives struct {
	driver.Driver
	hold   time.Duration
	always bool
}

func (s slowReceives) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	r, err := s.Driver.Receive(ctx, p)
	if len(r) > 0 || s.always {
		time.Sleep(s.hold)
	}
	return r, err
}

// TestEmptyReceiveWaitsForClaimInFlight: a receiver whose receive comes back
// empty must not end the worker while another receive, in flight, holds the
// only task (each task pushes the next, so ending early breaks the chain).
func TestEmptyReceiveWaitsForClaimInFlight(t *testing.T) {
	t.Parallel()
	q := openWrapped(t, slowClaimScheme)
	const links = 5
	push(t, q, &jobq.Task{Command: "0"})
	var ran atomic.Int64
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		ran.Add(1)
		var link int
		if _, err := fmt.Sscanf(job.Task.Command, "%d", &link); err != nil {
			return err
		}
		if link+1 < links {
			_, err := q.Push(ctx, &jobq.Task{Command: fmt.Sprint(link + 1)})
			return err
		}
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 4, Receivers: 4, Logger: quietLog(), Poll: 10 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ran.Load(); got != links {
		t.Fatalf("ran %d tasks; want %d: an empty receive ended the worker while another held a task", got, links)
	}
	if w.EndReason() != "queue empty" {
		t.Fatalf("end reason %q", w.EndReason())
	}
}

// slowCompleteScheme opens SQLite queues whose completions take 20 ms a
// call, as a struggling engine's would, and counts the leases completed.
const slowCompleteScheme = "sqlite-slowcomplete"

var slowCompleted atomic.Int64

func init() {
	if err := jobq.Register(slowCompleteScheme, wrapSQLite(func(d driver.Driver) driver.Driver { return slowCompletes{d} })); err != nil {
		panic(err)
	}
}

type slowCompletes struct{ driver.Driver }

func (s slowCompletes) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	time.Sleep(20 * time.Millisecond)
	errs := s.Driver.Complete(ctx, reqs)
	slowCompleted.Add(int64(len(reqs)))
	return errs
}

// TestSettlementBacklogIsBounded: when completions fall behind, fast
// handlers do not run ahead of them without bound: tasks that ran but are
// not yet completed stay within the worker's tokens plus 512.
func TestSettlementBacklogIsBounded(t *testing.T) {
	t.Parallel()
	q := openWrapped(t, slowCompleteScheme)
	const n, concurrency = 3000, 4
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("t%d", i)}
	}
	push(t, q, tasks...)
	base := slowCompleted.Load()
	var ran, most atomic.Int64
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error {
		if ahead := ran.Add(1) - (slowCompleted.Load() - base); ahead > most.Load() {
			most.Store(ahead)
		}
		return nil
	})
	if err := worker.Run(context.Background(), q, h, worker.Options{Concurrency: concurrency, Logger: quietLog(), Poll: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// 512 settling early, plus Concurrency+Prefetch (5×4) holding tokens.
	if bound := int64(512 + 5*concurrency); most.Load() > bound {
		t.Errorf("%d tasks ran ahead of their completions; want at most %d", most.Load(), bound)
	}
	if ran.Load() != n {
		t.Errorf("ran %d tasks, want %d", ran.Load(), n)
	}
}

// waitLogScheme opens SQLite queues that record the Wait of every receive
// made while a handler of TestBusyReceivesDoNotWait runs.
const waitLogScheme = "sqlite-waitlog"

// handlersRunning and busyWaits belong to TestBusyReceivesDoNotWait.
var (
	handlersRunning atomic.Int64
	busyWaits       struct {
		sync.Mutex
		waits []busyWait
	}
)

func init() {
	if err := jobq.Register(waitLogScheme, wrapSQLite(func(d driver.Driver) driver.Driver { return waitLog{d} })); err != nil {
		panic(err)
	}
}

type waitLog struct{ driver.Driver }

// Receive logs the wait of each receive made while a handler runs, and
// whether it found the queue empty (only then may a wait block).
func (l waitLog) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	busy := handlersRunning.Load() > 0
	got, err := l.Driver.Receive(ctx, p)
	if busy {
		busyWaits.Lock()
		busyWaits.waits = append(busyWaits.waits, busyWait{p.Wait, len(got) == 0})
		busyWaits.Unlock()
	}
	return got, err
}

// busyWait is one receive made while a handler ran.
type busyWait struct {
	wait  time.Duration
	empty bool
}

// TestBusyReceivesDoNotWait: a worker that exits on an empty queue does not
// block in the engine while its tasks run (whether it is done depends on
// them, not on a message arriving), so it ends as soon as the last one
// does; and it does not poll in a tight loop meanwhile.
func TestBusyReceivesDoNotWait(t *testing.T) {
	busyWaits.Lock()
	busyWaits.waits = nil // from an earlier run under -count
	busyWaits.Unlock()
	q := openWrapped(t, waitLogScheme)
	const tasks = 6
	for i := range tasks {
		push(t, q, &jobq.Task{Command: fmt.Sprint(i)})
	}
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		handlersRunning.Add(1)
		defer handlersRunning.Add(-1)
		// Staggered ends, so slots free up while other tasks run even
		// where timers that expire together run their goroutines in turn
		// (GOMAXPROCS=1).
		i, err := strconv.Atoi(job.Task.Command)
		if err != nil {
			return err
		}
		time.Sleep(time.Duration(100+40*i) * time.Millisecond)
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 4, Prefetch: -1, Logger: quietLog()})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := w.Counts(); c.Done != tasks || w.EndReason() != "queue empty" {
		t.Fatalf("done %d, end reason %q; want %d and queue empty", c.Done, w.EndReason(), tasks)
	}
	busyWaits.Lock()
	defer busyWaits.Unlock()
	if len(busyWaits.waits) == 0 || len(busyWaits.waits) > 20 {
		t.Errorf("%d receives while tasks ran; want a few (some, as slots free up; not a tight loop)", len(busyWaits.waits))
	}
	// A receive that began as the worker's first, before another brought
	// tasks, may still carry a wait, but it finds tasks (6 > a
	// receiver's share of 2) and so does not block; an empty one with a
	// wait would have blocked while tasks ran.
	for _, bw := range busyWaits.waits {
		if bw.empty && bw.wait != 0 {
			t.Errorf("an empty receive while tasks ran waited up to %v in the engine; want 0", bw.wait)
		}
	}
}

// TestTasksReuseGoroutines: a task runs on a goroutine that an earlier task
// ended on, rather than on a new one whose stack must grow again to the
// depth of processing and settling a task (a copy per task).
func TestTasksReuseGoroutines(t *testing.T) {
	t.Parallel()
	tests := []struct{ concurrency, prefetch int }{{1, 0}, {2, 0}, {4, 4}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("concurrency=%d/prefetch=%d", tt.concurrency, tt.prefetch), func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			const n = 400
			tasks := make([]*jobq.Task, n)
			for i := range tasks {
				tasks[i] = &jobq.Task{Command: fmt.Sprintf("t %d", i)}
			}
			push(t, q, tasks...)
			var mu sync.Mutex
			goroutines := map[string]bool{} // goroutine IDs are never reused
			h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
				buf := make([]byte, 64)
				buf = buf[:runtime.Stack(buf, false)]
				id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
				mu.Lock()
				goroutines[id] = true
				mu.Unlock()
				return nil
			})
			w := worker.New(q, h, worker.Options{Concurrency: tt.concurrency, Prefetch: tt.prefetch, Logger: quietLog(), Poll: 50 * time.Millisecond})
			if err := w.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := w.Counts().Done; got != n {
				t.Fatalf("completed %d tasks; want %d", got, n)
			}
			// Tasks still settling hold their goroutines (backlog.go), and a
			// runner that has just ended a task is not idle yet, so on a
			// loaded machine many tasks start on new goroutines; one
			// goroutine per task (n, as IDs are never reused) is what must
			// not happen.
			if limit := n * 9 / 10; len(goroutines) > limit {
				t.Errorf("%d tasks ran on %d goroutines; want goroutines reused (at most %d)", n, len(goroutines), limit)
			}
		})
	}
}

// inFlightScheme opens SQLite queues that record the most receives in
// flight at once (inFlightMost, reset by the test).
const inFlightScheme = "sqlite-inflight"

var inFlightNow, inFlightMost atomic.Int64

func init() {
	if err := jobq.Register(inFlightScheme, wrapSQLite(func(d driver.Driver) driver.Driver { return countedReceives{d} })); err != nil {
		panic(err)
	}
}

type countedReceives struct{ driver.Driver }

func (c countedReceives) Receive(ctx context.Context, p driver.ReceiveParams) ([]*driver.Received, error) {
	n := inFlightNow.Add(1)
	for {
		most := inFlightMost.Load()
		if n <= most || inFlightMost.CompareAndSwap(most, n) {
			break
		}
	}
	defer inFlightNow.Add(-1)
	return c.Driver.Receive(ctx, p)
}

// TestPartialReceiveKeepsOneReceiverPolling: a waiting worker whose
// receive brings fewer tasks than it asked for (the queue is drained)
// goes on with one receive in flight: the receiver parked after an empty
// receive stays parked, as tasks pushed one at a time would find nothing
// for it. (It resumed at every task, and a worker of one handler made two
// receives, each with its claims, per task.)
func TestPartialReceiveKeepsOneReceiverPolling(t *testing.T) {
	q := openWrapped(t, inFlightScheme)
	got := make(chan struct{}, 10)
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		got <- struct{}{}
		return nil
	})
	w := worker.New(q, h, worker.Options{Concurrency: 1, Receivers: 2, Wait: true, Logger: quietLog(),
		Poll: 10 * time.Millisecond, MaxPoll: 20 * time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	// The first task makes handlers fast (prefetch on); the idle
	// receivers settle: one polls, the other parks.
	push(t, q, &jobq.Task{Command: "first"})
	<-got
	time.Sleep(200 * time.Millisecond)
	inFlightMost.Store(inFlightNow.Load())
	for i := range 5 {
		push(t, q, &jobq.Task{Command: fmt.Sprint(i)})
		<-got
		time.Sleep(50 * time.Millisecond)
	}
	w.Drain()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if most := inFlightMost.Load(); most != 1 {
		t.Errorf("%d receives in flight at once with tasks pushed one at a time; want 1", most)
	}
}
