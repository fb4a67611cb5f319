package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/worker"
)

// memQueues numbers the mem queues, which live as long as the process, so
// that a test run twice (-count) gets fresh ones.
var memQueues atomic.Int64

// openMem opens a fresh queue on the in-process backend, which keeps
// result records; params are extra URL parameters.
func openMem(t testing.TB, params string) *jobq.Queue {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	url := fmt.Sprintf("mem://%s-%d", name, memQueues.Add(1))
	if params != "" {
		url += "?" + params
	}
	q, err := jobq.OpenWithOptions(context.Background(), url, jobq.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// pushOne pushes t and returns its ID.
func pushOne(t *testing.T, q *jobq.Queue, task *jobq.Task) string {
	t.Helper()
	res, err := q.Push(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// result reads task id's result record.
func result(t *testing.T, q *jobq.Queue, id string) *jobq.Result {
	t.Helper()
	r, err := q.Result(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestShellResultRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		command   string
		state     driver.ResultState
		exit      int
		output    []string
		errorText string
	}{
		{"success", "echo hello; echo to stderr >&2", driver.ResultSucceeded, 0, []string{"hello", "to stderr"}, ""},
		{"failure", "echo before failing; exit 3", driver.ResultDeadLettered, 3, []string{"before failing"}, "command exited with status 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := openMem(t, "")
			id := pushOne(t, q, &jobq.Task{Command: tc.command})
			w := worker.New(q, &worker.Shell{}, worker.Options{Logger: quietLog(), WorkerID: "w-test"})
			if err := w.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			r := result(t, q, id)
			if r.State != tc.state || r.ExitCode == nil || *r.ExitCode != tc.exit {
				t.Fatalf("record %+v; want state %s, exit code %d", r, tc.state, tc.exit)
			}
			for _, line := range tc.output {
				if !strings.Contains(r.Output, line) {
					t.Errorf("output %q lacks %q", r.Output, line)
				}
			}
			if !strings.Contains(r.Error, tc.errorText) || (tc.errorText == "") != (r.Error == "") {
				t.Errorf("error %q; want %q", r.Error, tc.errorText)
			}
			if r.Worker != "w-test" || r.Started.IsZero() || r.Finished.Before(r.Started) || r.DeliveryCount != 1 || r.Value != nil {
				t.Errorf("record %+v; want the worker, its times, one delivery, no value", r)
			}
		})
	}
}

// Sum is the result of the "add" tasks in the tests and examples.
type Sum struct {
	Sum int `json:"sum"`
}

func TestHandlerResultValue(t *testing.T) {
	t.Parallel()
	type args struct{ A, B int }
	mux := worker.NewMux()
	worker.HandleJSONResult(mux, "add", func(ctx context.Context, task *jobq.Task, p args) (Sum, error) {
		return Sum{Sum: p.A + p.B}, nil
	})
	worker.HandleResult(mux, "greet", func(ctx context.Context, task *jobq.Task) (any, error) {
		var p struct{ Name string }
		if err := json.Unmarshal(task.Payload, &p); err != nil {
			return nil, err
		}
		return "hello " + p.Name, nil
	})
	worker.HandleResult(mux, "unencodable", func(ctx context.Context, task *jobq.Task) (any, error) {
		return make(chan int), nil
	})
	worker.HandleJSONResult(mux, "fails", func(ctx context.Context, task *jobq.Task, p args) (Sum, error) {
		return Sum{Sum: 1}, errors.New("no sum today")
	})
	for _, tc := range []struct {
		kind    string
		payload string
		state   driver.ResultState
		value   string // JSON; empty for none
		errText string
	}{
		{"add", `{"A": 2, "B": 3}`, driver.ResultSucceeded, `{"sum":5}`, ""},
		{"greet", `{"Name": "ada"}`, driver.ResultSucceeded, `"hello ada"`, ""},
		{"add", `{"A": "two"}`, driver.ResultDeadLettered, "", "payload does not decode"},
		{"unencodable", `{}`, driver.ResultDeadLettered, "", "does not encode as JSON"},
		{"fails", `{}`, driver.ResultDeadLettered, "", "no sum today"},
	} {
		t.Run(tc.kind+" "+tc.payload, func(t *testing.T) {
			t.Parallel()
			q := openMem(t, "")
			id := pushOne(t, q, &jobq.Task{Kind: tc.kind, Payload: json.RawMessage(tc.payload)})
			if err := worker.Run(context.Background(), q, mux.Handler(), worker.Options{Logger: quietLog()}); err != nil {
				t.Fatal(err)
			}
			r := result(t, q, id)
			if r.State != tc.state || r.ExitCode != nil {
				t.Fatalf("record %+v; want state %s and no exit code", r, tc.state)
			}
			if string(r.Value) != tc.value {
				t.Errorf("value %s; want %s", r.Value, tc.value)
			}
			if !strings.Contains(r.Error, tc.errText) || (tc.errText == "") != (r.Error == "") {
				t.Errorf("error %q; want %q", r.Error, tc.errText)
			}
		})
	}
}

// TestTimeLimitResultRecord: a task stopped at its own time limit (which
// overrides the worker's) is recorded as a failure that says so, with its
// output up to then.
func TestTimeLimitResultRecord(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	id := pushOne(t, q, &jobq.Task{Command: "echo started; sleep 60", TimeLimit: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second) // a guard, should the limit fail
	defer cancel()
	w := worker.New(q, &worker.Shell{KillTimeout: 10 * time.Second}, worker.Options{Logger: quietLog(), TaskTimeLimit: time.Hour})
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	r := result(t, q, id)
	if r.State != driver.ResultDeadLettered || !strings.Contains(r.Error, "time limit 300ms exceeded") || !strings.Contains(r.Output, "started") {
		t.Fatalf("record %+v; want dead-lettered at the time limit, with the output", r)
	}
	if len(r.Attempts) != 1 || r.Attempts[0].Outcome != jobq.OutcomeFailure {
		t.Fatalf("attempts %+v; want one failure", r.Attempts)
	}
}
