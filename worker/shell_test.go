package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/worker"
)

func TestShellOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		cmd        string
		env        []jobq.EnvVar
		wantErr    string // "" for success
		wantCode   int    // the TaskError's ExitCode; 0 for none checked
		wantDetail []string
		notDetail  []string
	}{
		{name: "success", cmd: "true"},
		{name: "exit status", cmd: "echo before; exit 4", wantErr: "exited with status 4", wantCode: 4, wantDetail: []string{"before"}},
		{name: "tail keeps the last 100 lines", cmd: "for i in $(seq 150); do echo line$i; done; exit 1",
			wantErr: "status 1", wantDetail: []string{"[...]", "line150", "line51\n"}, notDetail: []string{"line50\n"}},
		{name: "stderr in the tail", cmd: "echo oops >&2; exit 2", wantErr: "status 2", wantDetail: []string{"oops"}},
		{name: "task env and ids", cmd: `[ "$A" = "x y" ] && [ "$JOBQ_TASK_ID" = "tid" ] && [ "$JOBQ_QUEUE_NAME" = "qn" ]`,
			env: []jobq.EnvVar{{Name: "A", Value: "x y"}}},
		// A command killed by a signal records 128 + its number, whether
		// it was the main process (bash exec'd it) or bash's child.
		{name: "signal", cmd: "kill -9 $$", wantErr: "killed by signal", wantCode: 137},
		{name: "signal to bash's child", cmd: "bash -c 'kill -9 $$'; exit $?", wantErr: "status 137", wantCode: 137},
		// Over Linux's 128 KiB limit for one argument: runs from a script file.
		{name: "command longer than an argument may be", cmd: "x='" + strings.Repeat("a", 300<<10) + "'; echo ${#x}; exit 3",
			wantErr: "status 3", wantDetail: []string{"307200"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sh := worker.NewShell()
			job := &worker.Job{Task: &jobq.Task{ID: "tid", Command: tt.cmd, Env: tt.env}, Log: quietLog(), QueueName: "qn"}
			err := sh.Handle(context.Background(), job)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Handle: %v", err)
				}
				return
			}
			var te *worker.TaskError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Handle returned %v; want a TaskError with %q", err, tt.wantErr)
			}
			if tt.wantCode != 0 && (te.ExitCode == nil || *te.ExitCode != tt.wantCode) {
				t.Errorf("exit code %v; want %d", te.ExitCode, tt.wantCode)
			}
			for _, s := range tt.wantDetail {
				if !strings.Contains(te.Detail+"\n", s) {
					t.Errorf("detail lacks %q:\n%s", s, te.Detail)
				}
			}
			for _, s := range tt.notDetail {
				if strings.Contains(te.Detail+"\n", s) {
					t.Errorf("detail has %q, which should have been dropped", s)
				}
			}
		})
	}
}

func TestShellStopsProcessGroupOnCancel(t *testing.T) {
	t.Parallel()
	sh := worker.NewShell()
	ctx, cancel := context.WithCancelCause(context.Background())
	job := &worker.Job{Task: &jobq.Task{ID: "t", Command: "sleep 30 & sleep 30; wait"}, Log: quietLog()}
	done := make(chan error, 1)
	go func() { done <- sh.Handle(ctx, job) }()
	time.Sleep(200 * time.Millisecond)
	cancel(errors.New("test stop"))
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "test stop") {
			t.Fatalf("Handle returned %v; want the cancel cause", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the task's process group did not stop on cancel")
	}
}

func TestShellRejectsPayloadTask(t *testing.T) {
	t.Parallel()
	job := &worker.Job{Task: &jobq.Task{ID: "p", Payload: []byte(`{"x": 1}`)}, Log: quietLog()}
	if err := worker.NewShell().Handle(context.Background(), job); err == nil || !strings.Contains(err.Error(), "no command") {
		t.Fatalf("Handle returned %v; want an error saying the task has no command", err)
	}
}

// TestShellDeadLettersPayloadTaskAtOnce: a task without a command (a JSON
// line without "cmd", pushed for a Go handler) reaching the shell worker
// is dead-lettered on its first delivery, its retries unspent, as a Mux
// does with a task it has no handler for: no retry can give it a command,
// and retrying it only trips the failure streak with one task.
func TestShellDeadLettersPayloadTaskAtOnce(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Payload: []byte(`{"x": 1}`), NumRetries: 3})
	w := worker.New(q, worker.NewShell(), worker.Options{Concurrency: 1, Logger: quietLog()})
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	if c := w.Counts(); c.DeadLettered != 1 || c.Failed != 1 {
		t.Fatalf("counts %+v; want the one task failed once and dead-lettered", c)
	}
	dead, err := q.Admin().DeadLetters(context.Background(), 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters = %d, %v; want 1", len(dead), err)
	}
	if d := dead[0]; d.DeliveryCount != 1 || !strings.Contains(d.Reason, "has no command") {
		t.Errorf("dead letter: %d deliveries, reason %q; want 1 delivery and a reason saying the task has no command", d.DeliveryCount, d.Reason)
	}
}

func TestLeaseLostIsNotAFailure(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "long"})
	var causes []error
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if job.Envelope.DeliveryCount > 1 {
			return nil
		}
		<-ctx.Done()
		causes = append(causes, context.Cause(ctx))
		return ctx.Err()
	})
	w := worker.New(q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, Visibility: time.Second, DisableHeartbeat: true})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := w.Counts()
	if c.LeaseLost != 1 || c.Failed != 0 || c.Done != 1 {
		t.Fatalf("counts %+v; want the lost lease not counted as a failure and the redelivery done", c)
	}
	if len(causes) != 1 || !errors.Is(causes[0], errcode.LockLost) {
		t.Fatalf("causes %v; want errcode.LockLost", causes)
	}
}

// TestHeartbeatKeepsLease: tasks that run for 2.5 leases finish without
// losing them, one at a time and several at once (the worker's one lease
// keeper renews them all).
func TestHeartbeatKeepsLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		tasks, concurrency int
	}{
		{"one task", 1, 1},
		{"six tasks, three at a time", 6, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			for i := range tc.tasks {
				push(t, q, &jobq.Task{Command: fmt.Sprintf("long %d", i)})
			}
			h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
				select {
				case <-time.After(2500 * time.Millisecond):
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})
			w := worker.New(q, h, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, Visibility: time.Second, Concurrency: tc.concurrency})
			if err := w.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if c := w.Counts(); c.Done != int64(tc.tasks) || c.LeaseLost != 0 {
				t.Fatalf("counts %+v; want %d tasks done once each with their leases renewed", c, tc.tasks)
			}
		})
	}
}

func TestGateFailureDefersWithoutFailing(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "gated", GateCmd: "check", NumRetries: 1})
	gateRuns := 0
	w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error {
		t.Error("the task ran although its gate failed")
		return nil
	}), worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond,
		Gate: worker.GateConfig{RequeueDelay: time.Minute},
		GateRunner: func(context.Context, string) error {
			gateRuns++
			return errors.New("no GPU")
		}})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := w.Counts()
	if c.Requeued != 1 || c.Failed != 0 || gateRuns != 1 {
		t.Fatalf("counts %+v, gate runs %d; want one requeue, no failure", c, gateRuns)
	}
	st, err := q.Admin().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Delayed != 1 {
		t.Fatalf("stats %+v; want the task delayed", st)
	}
}

func TestGateNotQualifiedEndsWorker(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	for _, c := range []string{"a", "b", "c"} {
		push(t, q, &jobq.Task{Command: c, GateCmd: "check-" + c})
	}
	w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil }),
		worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond, Wait: true,
			Gate:       worker.GateConfig{RequeueDelay: time.Minute, MaxNotQualified: 3},
			GateRunner: func(context.Context, string) error { return errors.New("no") }})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.EndReason() != "gate not qualified" {
		t.Fatalf("end reason %q; want gate not qualified (even with Wait)", w.EndReason())
	}
}

// TestShellCheck: a worker host without bash on PATH is told so before a
// task is claimed; with bash, Check passes.
func TestShellCheck(t *testing.T) {
	if err := worker.NewShell().Check(); err != nil {
		t.Fatalf("Check with bash on PATH: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if err := worker.NewShell().Check(); err == nil || !strings.Contains(err.Error(), "bash, which is not on PATH") {
		t.Fatalf("Check without bash = %v; want an error saying bash is not on PATH", err)
	}
}
