package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/worker"
)

// TestStopAfterShellTaskExitedCompletes: a shell task whose main process
// exited 0 (leaving a background process that holds its output) before
// the worker is stopped succeeded; the stop, which comes while the worker
// waits for that output to close, must not requeue it to run again.
func TestStopAfterShellTaskExitedCompletes(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	mark := filepath.Join(t.TempDir(), "pid")
	push(t, q, &jobq.Task{Command: "sleep 60 & echo $$ > " + mark + ".tmp && mv " + mark + ".tmp " + mark + "; exit 0"})
	sh := &worker.Shell{OrphanGrace: 3 * time.Second, KillTimeout: 10 * time.Second}
	w := worker.New(q, sh, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()

	// The barrier: the task's bash has written its PID and is gone.
	waitExited(t, mark)
	w.Stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	c := w.Counts()
	st, err := q.Admin().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.Done != 1 || c.Requeued != 0 || st.Ready != 0 || st.InFlight != 0 {
		t.Fatalf("counts %+v, queue %+v; want the task, which exited 0 before the stop, completed and not requeued", c, st)
	}
}

// TestShellFailureBeforeStopStands: a shell task whose main process exited
// with a failure, leaving a background process that holds its output, is
// settled by that failure when the worker stops or the task's time limit
// passes while the worker waits for that output. It used to be requeued
// unspent on a stop, to run again, and to be recorded as "time limit
// exceeded" at its time limit.
func TestShellFailureBeforeStopStands(t *testing.T) {
	t.Parallel()
	const limit = 2 * time.Second
	tests := []struct {
		name      string
		timeLimit time.Duration
		stop      bool // the worker stops; else the time limit passes
	}{
		{name: "worker stops", stop: true},
		{name: "time limit passes", timeLimit: limit},
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		for i, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				q := engines.Open(t, engines.URLs(t, "failedbeforestop"+strconv.Itoa(i))[engine])
				dir := t.TempDir()
				mark, release := filepath.Join(dir, "pid"), filepath.Join(dir, "release")
				// The background loop holds the output until the test
				// releases it.
				id := pushOne(t, q, &jobq.Task{TimeLimit: tt.timeLimit, Command: `(until [ -e "` + release + `" ]; do sleep 0.02; done) & ` +
					`echo $$ > "` + mark + `.tmp" && mv "` + mark + `.tmp" "` + mark + `"; exit 3`})
				sh := &worker.Shell{OrphanGrace: time.Minute, KillTimeout: time.Minute}
				w := worker.New(q, sh, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
				errc := make(chan error, 1)
				go func() { errc <- w.Run(context.Background()) }()

				waitExited(t, mark)
				if tt.stop {
					w.Stop()
				} else {
					time.Sleep(limit) // the limit runs from before the main process started
				}
				if err := os.WriteFile(release, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if c := w.Counts(); c.DeadLettered != 1 || c.Requeued != 0 {
					t.Fatalf("counts %+v; want the task, which failed before the stop, dead-lettered (no retries) and not requeued", c)
				}
				if r := result(t, q, id); r.Error != "command exited with status 3" {
					t.Fatalf("recorded error %q; want the command's own failure", r.Error)
				}
			})
		}
	}
}

// waitExited waits until the task's bash has written its PID to mark and
// exited.
func waitExited(t *testing.T, mark string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(mark)
		if err == nil {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); pid > 0 && os.IsNotExist(err) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the task's main process never exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
