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
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(mark)
		if err == nil {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); pid > 0 && os.IsNotExist(err) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the task's main process never exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
