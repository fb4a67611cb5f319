package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/redis"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
	"github.com/jobq/jobq/tools/testkit/tcpfault"
	"github.com/jobq/jobq/worker"
)

// redisBehindProxy opens a fresh Redis queue through a tcpfault proxy, and
// the same queue directly; it skips the test when Redis is not running.
func redisBehindProxy(t *testing.T) (*tcpfault.Proxy, *jobq.Queue, *jobq.Queue) {
	t.Helper()
	p, proxied, direct := tcpfault.ForTest(t, "JOBQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0", map[string]string{"prefix": "jobqtest"})
	open := func(s string) *jobq.Queue {
		q, err := jobq.OpenWithOptions(context.Background(), s, jobq.Options{Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	q, truth := open(proxied), open(direct)
	t.Cleanup(func() {
		_, _ = truth.Admin().Clear(context.Background())
		q.Close()
		truth.Close()
	})
	return p, q, truth
}

// TestSettlementWhoseAnswerWasLost completes a task through a proxy that
// drops the reply to the completion: the completion is applied, the worker
// retries it, and the retry finds the lease gone. The worker must not say
// the task will run again: its event and log say the completion may have
// been stored (MaybeApplied), as it was, and its summary counts it.
func TestSettlementWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	p, q, truth := redisBehindProxy(t)
	ctx := context.Background()
	engines.WarmUp(t, q)
	pushed, err := q.Push(ctx, &jobq.Task{Command: "echo once"})
	if err != nil {
		t.Fatal(err)
	}
	// The completion is the script that names the task, after it ran.
	completion := func(b []byte) bool {
		return tcpfault.Contains("evalsha")(b) && tcpfault.Contains(pushed.ID)(b)
	}
	log := &syncbuf.Buffer{}
	w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error {
		p.Arm(tcpfault.Rule{Fault: tcpfault.DropReply, Match: completion})
		return nil
	}), worker.Options{Concurrency: 1, Prefetch: -1, MaxTasks: 1, NoSchedules: true, Visibility: time.Minute, Logger: slog.New(slog.NewTextHandler(log, nil))})
	evs, stop := w.Subscribe(8)
	defer stop()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Run(rctx); err != nil {
		t.Fatal(err)
	}
	if p.Fired() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", p.Fired())
	}
	if n, err := truth.Admin().Size(ctx); err != nil || n != 0 {
		t.Fatalf("queue size %d (%v): the dropped completion should have been applied", n, err)
	}
	ev := <-evs
	var je *jobq.Error
	if ev.Outcome != worker.Completed || ev.Durable || !errors.As(ev.SettleErr, &je) || !je.MaybeApplied {
		t.Errorf("event %s durable=%v settle error %v; want completed, not durable, with MaybeApplied", ev.Outcome, ev.Durable, ev.SettleErr)
	}
	if !errors.Is(ev.SettleErr, errcode.LockLost) {
		t.Errorf("settle error %v; want the retry's LockLost", ev.SettleErr)
	}
	out := log.String()
	if strings.Contains(out, "it runs again unless") || !strings.Contains(out, "may have settled it") {
		t.Errorf("the log does not say the completion may have been stored:\n%s", out)
	}
	// The summary said done=0 and nothing else: the task was in no count.
	if !strings.Contains(out, "msg=\"worker finished\"") || !strings.Contains(out, "done=0") || !strings.Contains(out, "succeeded_not_completed=1") {
		t.Errorf("the worker's summary does not count the task that succeeded without a known completion:\n%s", out)
	}
}
