package jobq_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// openMem opens a fresh mem queue with the URL parameters params.
func openMem(t *testing.T, params string) *jobq.Queue {
	t.Helper()
	u := "mem://results-" + rand.Text()
	if params != "" {
		u += "?" + params
	}
	q, err := jobq.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func receiveOne(t *testing.T, q *jobq.Queue) *jobq.Envelope {
	t.Helper()
	e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestResultRecordsAtSettlement(t *testing.T) {
	t.Parallel()
	code := 3
	start := time.Now().Add(-time.Second).UTC().Round(0)
	tests := []struct {
		name   string
		settle func(*jobq.Envelope) error
		want   jobq.Result
	}{
		{"complete with a value", func(e *jobq.Envelope) error {
			hooks.RecordAttempt(e, jobq.Attempt{Worker: "w1", Host: "h1", Start: start, Outcome: jobq.OutcomeSuccess})
			e.SetResult(jobq.ResultDetails{Value: json.RawMessage(`{"answer":42}`), Output: "done\n"})
			return e.Complete(context.Background())
		}, jobq.Result{State: driver.ResultSucceeded, Value: json.RawMessage(`{"answer":42}`), Output: "done\n", Worker: "w1", Host: "h1", Started: start, DeliveryCount: 1}},
		{"dead letter with the detail as output", func(e *jobq.Envelope) error {
			hooks.RecordAttempt(e, jobq.Attempt{Worker: "w2", Outcome: jobq.OutcomeFailure, ExitCode: &code, Start: start})
			return e.DeadLetter(context.Background(), "exit 3", "the tail")
		}, jobq.Result{State: driver.ResultDeadLettered, Error: "exit 3", Output: "the tail", ExitCode: &code, Worker: "w2", Started: start, DeliveryCount: 1}},
		{"fail without retries", func(e *jobq.Envelope) error {
			e.SetResult(jobq.ResultDetails{ExitCode: &code, Output: "out"})
			_, err := e.Fail(context.Background(), errors.New("boom"), "detail")
			return err
		}, jobq.Result{State: driver.ResultDeadLettered, Error: "boom", Output: "out", ExitCode: &code, DeliveryCount: 1}},
		{"cancel", func(e *jobq.Envelope) error {
			return e.Cancel(context.Background(), "stopped by request")
		}, jobq.Result{State: driver.ResultCancelled, Error: "stopped by request", DeliveryCount: 1}},
		{"invalid JSON value kept as a string", func(e *jobq.Envelope) error {
			e.SetResult(jobq.ResultDetails{Value: json.RawMessage(`not json`)})
			return e.Complete(context.Background())
		}, jobq.Result{State: driver.ResultSucceeded, Value: json.RawMessage(`"not json"`), DeliveryCount: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := openMem(t, "")
			r, err := q.Push(t.Context(), &jobq.Task{Command: "echo " + tt.name})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Result(t.Context(), r.ID); errcode.Of(err) != errcode.NotFound {
				t.Fatalf("Result before the task ended: %v; want NotFound", err)
			}
			if err := tt.settle(receiveOne(t, q)); err != nil {
				t.Fatal(err)
			}
			got, err := q.Result(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if got.ID != r.ID || got.State != want.State || got.Error != want.Error || got.Output != want.Output ||
				string(got.Value) != string(want.Value) || got.Worker != want.Worker || got.Host != want.Host ||
				!got.Started.Equal(want.Started) || got.DeliveryCount != want.DeliveryCount ||
				(got.ExitCode == nil) != (want.ExitCode == nil) || (got.ExitCode != nil && *got.ExitCode != *want.ExitCode) {
				t.Errorf("result = %+v\nwant %+v", got, want)
			}
			if got.Finished.IsZero() {
				t.Errorf("result has no finish time")
			}
			if left := time.Until(got.ExpiresAt); left < driver.DefaultRetention-time.Minute || left > driver.DefaultRetention {
				t.Errorf("record expires in %v; want the default retention %v", left, driver.DefaultRetention)
			}
		})
	}
}

func TestWaitAndCancel(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	ctx := t.Context()
	var ids []string
	for _, cmd := range []string{"echo a", "echo b", "echo c"} {
		r, err := q.Push(ctx, &jobq.Task{Command: cmd})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	got := make(chan []*jobq.Result, 1)
	go func() {
		rs, err := q.Wait(ctx, ids...)
		if err != nil {
			t.Error(err)
		}
		got <- rs
	}()
	if err := receiveOne(t, q).Complete(ctx); err != nil { // a
		t.Fatal(err)
	}
	e := receiveOne(t, q) // b, running
	cs, err := q.Admin().Cancel(ctx, ids[0], ids[1], ids[2])
	if err != nil {
		t.Fatal(err)
	}
	want := []jobq.CancelOutcome{jobq.CancelTooLate, jobq.CancelPending, jobq.CancelRemoved}
	for i, c := range cs {
		if c.ID != ids[i] || c.Outcome != want[i] {
			t.Errorf("cancel %d = %+v; want outcome %s", i, c, want[i])
		}
	}
	if asked, err := hooks.CancelRequested(ctx, q, ids); err != nil || len(asked) != 1 || asked[0] != ids[1] {
		t.Errorf("CancelRequested = %v, %v; want [%s]", asked, err, ids[1])
	}
	if ok, err := hooks.EnvelopeCancelRequested(ctx, e); err != nil || !ok {
		t.Errorf("Envelope.CancelRequested = %v, %v; want true", ok, err)
	}
	if err := e.Cancel(ctx, "cancelled by request"); err != nil {
		t.Fatal(err)
	}
	rs := <-got
	states := []driver.ResultState{driver.ResultSucceeded, driver.ResultCancelled, driver.ResultCancelled}
	for i, r := range rs {
		if r == nil || r.State != states[i] {
			t.Errorf("Wait result %d = %+v; want state %s", i, r, states[i])
		}
	}
	if _, err := q.Receive(ctx, jobq.ReceiveOptions{}); !errors.Is(err, jobq.ErrEmpty) {
		t.Errorf("after cancelling every task, Receive = %v; want ErrEmpty", err)
	}
}

func TestResultsUnsupported(t *testing.T) {
	t.Parallel()
	q := openMem(t, "unsupported=results,cancel")
	ctx := t.Context()
	if _, err := q.Result(ctx, "x"); errcode.Of(err) != errcode.Unimplemented {
		t.Errorf("Result: %v; want Unimplemented", err)
	}
	if _, err := q.Wait(ctx, "x"); errcode.Of(err) != errcode.Unimplemented {
		t.Errorf("Wait: %v; want Unimplemented", err)
	}
	if _, err := q.Admin().Cancel(ctx, "x"); errcode.Of(err) != errcode.Unimplemented {
		t.Errorf("Cancel: %v; want Unimplemented", err)
	}
	if ids, err := hooks.CancelRequested(ctx, q, []string{"x"}); err != nil || len(ids) != 0 {
		t.Errorf("CancelRequested: %v, %v; want none", ids, err)
	}
	// Settlements still work, without records.
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo x"}); err != nil {
		t.Fatal(err)
	}
	if err := receiveOne(t, q).Complete(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionPolicyAndPurge(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	ctx := t.Context()
	p, err := hooks.ParsePolicy("retention", "1s")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Admin().SetPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	r, err := q.Push(ctx, &jobq.Task{Command: "echo short-lived"})
	if err != nil {
		t.Fatal(err)
	}
	if err := receiveOne(t, q).Complete(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := q.Result(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(res.ExpiresAt); left > time.Second {
		t.Fatalf("record expires in %v; want within the 1s retention", left)
	}
	time.Sleep(time.Until(res.ExpiresAt) + 10*time.Millisecond)
	if _, err := q.Result(ctx, r.ID); errcode.Of(err) != errcode.NotFound {
		t.Errorf("Result after the retention: %v; want NotFound", err)
	}
	if n, err := q.Admin().PurgeResults(ctx); err != nil || n != 1 {
		t.Errorf("PurgeResults = %d, %v; want 1", n, err)
	}
}

func TestFailRetryBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy string // retry-backoff policy of the queue; "" for none
		task   jobq.Backoff
		lo, hi time.Duration // the first retry's delay
	}{
		{"default", "", jobq.Backoff{}, 5 * time.Second, 10 * time.Second},
		{"queue policy", "2m,1h", jobq.Backoff{}, time.Minute, 2 * time.Minute},
		{"task over policy", "2m,1h", jobq.Backoff{Base: 4 * time.Second, Cap: time.Minute}, 2 * time.Second, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := openMem(t, "")
			ctx := t.Context()
			if tt.policy != "" {
				p, err := hooks.ParsePolicy("retry-backoff", tt.policy)
				if err != nil {
					t.Fatal(err)
				}
				if err := q.Admin().SetPolicy(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := q.Push(ctx, &jobq.Task{Command: "false", NumRetries: 1, RetryBackoff: tt.task}); err != nil {
				t.Fatal(err)
			}
			e := receiveOne(t, q)
			hooks.RecordAttempt(e, jobq.Attempt{Outcome: jobq.OutcomeFailure, Worker: "w"})
			res, err := e.Fail(ctx, errors.New("exit 1"), "")
			if err != nil {
				t.Fatal(err)
			}
			if !res.Retried || res.Delay < tt.lo || res.Delay > tt.hi {
				t.Fatalf("Fail = %+v; want a retry after %v..%v", res, tt.lo, tt.hi)
			}
			st, err := q.Admin().Stats(ctx)
			if err != nil || st.Delayed != 1 || st.Ready != 0 {
				t.Fatalf("stats after the failure: %+v, %v; want the retry delayed", st, err)
			}
			peeked, err := q.Admin().Peek(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			as := peeked[0].Task.Attempts
			if len(as) != 1 || as[0].RetryDelay != res.Delay.Round(time.Millisecond) {
				t.Errorf("attempt history %+v; want the failure with retry delay %v", as, res.Delay)
			}
		})
	}
}

func TestFailWithoutDelayedRequeueRetriesAtOnce(t *testing.T) {
	t.Parallel()
	q := openMem(t, "unsupported=delayed-requeue")
	ctx := t.Context()
	if _, err := q.Push(ctx, &jobq.Task{Command: "false", NumRetries: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := receiveOne(t, q).Fail(ctx, errors.New("exit 1"), "")
	if err != nil || !res.Retried || res.Delay != 0 {
		t.Fatalf("Fail = %+v, %v; want an immediate retry", res, err)
	}
	if e := receiveOne(t, q); e.DeliveryCount != 2 {
		t.Errorf("delivery %d; want 2", e.DeliveryCount)
	}
}

func TestPushPosition(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	ctx := t.Context()
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo first"}); err != nil {
		t.Fatal(err)
	}
	r, err := q.Push(ctx, &jobq.Task{Command: "echo not asked"})
	if err != nil || r.Position != -1 {
		t.Fatalf("Push = %+v, %v; want Position -1 when not asked", r, err)
	}
	tasks := []*jobq.Task{{Command: "echo a"}, {Command: "echo first"}, {Command: "echo later", NotBefore: time.Now().Add(time.Hour)}, {Command: "echo b"}}
	rs, err := q.PushBatch(ctx, tasks, jobq.PushOptions{Position: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{2, -1, -1, 3} // a duplicate and a delayed task have none
	for i, r := range rs {
		if r.Position != want[i] {
			t.Errorf("task %d: position %d; want %d", i, r.Position, want[i])
		}
	}
	approx := openMem(t, "unsupported=exact-count")
	rs, err = approx.PushBatch(ctx, []*jobq.Task{{Command: "echo x"}}, jobq.PushOptions{Position: true})
	if err != nil || rs[0].Position != -1 {
		t.Errorf("PushBatch on a queue with approximate counts = %+v, %v; want Position -1", rs, err)
	}
}

func TestLargeValueGoesToTheStash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	q, err := jobq.OpenWithOptions(ctx, "mem://results-stash-"+rand.Text(), jobq.Options{StashURL: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r, err := q.Push(ctx, &jobq.Task{Command: "echo big"})
	if err != nil {
		t.Fatal(err)
	}
	value := json.RawMessage(`{"blob": "` + strings.Repeat("x", 100<<10) + `"}`)
	e := receiveOne(t, q)
	e.SetResult(jobq.ResultDetails{Value: value})
	if err := e.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("stash holds %v (%v); want the value's object", entries, err)
	}
	res, err := q.Result(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Value) != string(value) {
		t.Errorf("the stashed value came back as %d bytes; want the %d pushed", len(res.Value), len(value))
	}
	// A stash object that is gone is an error that says so.
	if err := os.Remove(filepath.Join(dir, entries[0].Name())); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Result(ctx, r.ID); err == nil || !strings.Contains(err.Error(), "could not be read") {
		t.Errorf("Result with its stash object gone: %v; want an error saying the value could not be read", err)
	}
}

func TestWaitAfterSkipsAnEarlierTasksRecord(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	ctx := t.Context()
	task := func() *jobq.Task { return &jobq.Task{Command: "echo same"} }
	r, err := q.Push(ctx, task())
	if err != nil {
		t.Fatal(err)
	}
	e := receiveOne(t, q)
	if _, err := e.Fail(ctx, errors.New("first run failed"), ""); err != nil {
		t.Fatal(err)
	}
	pushed := time.Now()
	if r2, err := q.Push(ctx, task()); err != nil || r2.ID != r.ID {
		t.Fatalf("push again = %+v, %v; want the same ID %s", r2, err, r.ID)
	}
	got := make(chan *jobq.Result, 1)
	go func() {
		err := q.WaitFunc(ctx, []string{r.ID}, jobq.WaitOptions{After: pushed}, func(res *jobq.Result) error {
			got <- res
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}()
	select {
	case res := <-got:
		t.Fatalf("WaitFunc with After reported the earlier run's record %+v", res)
	case <-time.After(100 * time.Millisecond):
	}
	if err := receiveOne(t, q).Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-got; res.State != driver.ResultSucceeded || res.Recorded.Before(pushed) {
		t.Errorf("WaitFunc with After reported %+v; want the second run's success", res)
	}
	if rs, err := q.Wait(ctx, r.ID); err != nil || rs[0].State != driver.ResultSucceeded {
		t.Errorf("Wait = %v, %v", rs, err)
	}
}

func TestPoisonRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	drv, err := mem.New(mem.Options{Queue: "results-poison-" + rand.Text()})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(drv, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := drv.Push(ctx, []*driver.Message{{ID: "poison-1", Body: []byte("not a task")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Receive(ctx, jobq.ReceiveOptions{}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("Receive of a poison message: %v; want ErrEmpty", err)
	}
	r, err := q.Result(ctx, "poison-1")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != driver.ResultDeadLettered || !strings.Contains(r.Error, "poison") {
		t.Errorf("poison record %+v; want dead-lettered, saying poison", r)
	}
}
