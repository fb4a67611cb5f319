package worker_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
	"github.com/jobq/jobq/worker"
)

// TestStoppedTaskEndsWithItsProcessGroup: when the worker stops a shell
// task whose main shell dies of the SIGTERM at once, the processes it
// started still get the kill timeout to finish, and none of them runs on
// once the task is requeued: a child still saving its work after the
// SIGTERM finishes saving (it used to be killed OrphanGrace after the
// shell exited), and a child that ignores SIGTERM and does not hold the
// output gets SIGKILL at the kill timeout (it used to run on, unsupervised,
// beside the task's next attempt). Under a pseudo-terminal (EmulateTTY) the
// command gets the kill timeout too (script(1) used to kill it 2 seconds
// after the SIGTERM).
func TestStoppedTaskEndsWithItsProcessGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cmd   string // writes the PID of the process to watch to $PIDFILE once ready for the SIGTERM
		sh    worker.Shell
		saved bool // the child writes $SAVED when it has saved its work
	}{
		{
			name:  "child saving its work after the SIGTERM",
			cmd:   `(trap 'sleep 1; echo saved > "$SAVED"; exit 0' TERM; echo $BASHPID > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; while :; do sleep 0.05; done) & wait`,
			sh:    worker.Shell{OrphanGrace: 100 * time.Millisecond, KillTimeout: time.Minute},
			saved: true,
		},
		{
			name: "child ignoring SIGTERM without the output",
			cmd:  `(trap '' TERM; echo $BASHPID > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 300) >/dev/null 2>&1 & wait`,
			sh:   worker.Shell{KillTimeout: 500 * time.Millisecond},
		},
		{
			name:  "pseudo-terminal task saving its work after the SIGTERM",
			cmd:   `trap 'sleep 3; echo saved > "$SAVED"; exit 0' TERM; echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; while :; do sleep 0.05; done`,
			sh:    worker.Shell{EmulateTTY: true, KillTimeout: time.Minute},
			saved: true,
		},
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		for i, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				q := engines.Open(t, engines.URLs(t, "stopgroup"+strconv.Itoa(i))[engine])
				dir := t.TempDir()
				pidFile, saved := filepath.Join(dir, "pid"), filepath.Join(dir, "saved")
				push(t, q, &jobq.Task{Command: tt.cmd, Env: []jobq.EnvVar{
					{Name: "PIDFILE", Value: pidFile}, {Name: "SAVED", Value: saved}}})
				sh := tt.sh
				sh.Env = os.Environ()
				w := worker.New(q, &sh, worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
				errc := make(chan error, 1)
				go func() { errc <- w.Run(context.Background()) }()

				pid := waitForPIDFile(t, pidFile)
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
				w.Stop()
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if processRuns(pid) {
					t.Errorf("the task's child %d still runs after its task was requeued", pid)
				}
				if _, err := os.Stat(saved); tt.saved && err != nil {
					t.Errorf("the child did not finish saving within the kill timeout: %v", err)
				}
				st, err := q.Admin().Stats(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if c := w.Counts(); c.Requeued != 1 || c.Failed != 0 || st.Ready != 1 {
					t.Fatalf("counts %+v, queue %+v; want the stopped task requeued", c, st)
				}
			})
		}
	}
}

// waitForPIDFile waits until the task has written its child's PID to path.
func waitForPIDFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the task's child never wrote its PID")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processRuns reports whether process pid exists and is not a zombie.
func processRuns(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestStoppedTaskIsNotHeldByZombies: a stopped task whose process group
// keeps only a zombie — a child whose parent left the group and does not
// reap it, as every orphan is when the worker runs as PID 1 in a container
// — ends without waiting for the kill timeout.
func TestStoppedTaskIsNotHeldByZombies(t *testing.T) {
	t.Parallel()
	// The parent forks a child that exits at once, leaves the task's group
	// and sleeps without reaping it.
	const zombie = `python3 -c 'import os, sys, time
if os.fork() == 0:
    os._exit(0)
os.setpgid(0, 0)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)' "$PIDFILE" >/dev/null 2>&1 & wait`
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			q := engines.Open(t, engines.URLs(t, "stopzombie")[engine])
			pidFile := filepath.Join(t.TempDir(), "pid")
			push(t, q, &jobq.Task{Command: zombie, Env: []jobq.EnvVar{{Name: "PIDFILE", Value: pidFile}}})
			var logs syncbuf.Buffer
			sh := &worker.Shell{Env: os.Environ(), KillTimeout: 5 * time.Second}
			w := worker.New(q, sh, worker.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Poll: 100 * time.Millisecond})
			errc := make(chan error, 1)
			go func() { errc <- w.Run(context.Background()) }()

			parent := waitForPIDFile(t, pidFile)
			t.Cleanup(func() { _ = syscall.Kill(parent, syscall.SIGKILL) })
			w.Stop()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if strings.Contains(logs.String(), "did not stop within the kill timeout") {
				t.Fatalf("the task waited out its kill timeout for a zombie:\n%s", logs.String())
			}
			if c := w.Counts(); c.Requeued != 1 {
				t.Fatalf("counts %+v; want the stopped task requeued", c)
			}
		})
	}
}
