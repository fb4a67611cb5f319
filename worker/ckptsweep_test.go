//go:build linux

package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// TestCheckpointDirsOfKilledWorkersAreDeleted: a worker killed while its
// task had written to $JOBQ_CHECKPOINT_DIR leaves that directory behind
// (a model's checkpoint, gigabytes); the next worker with checkpoints on
// the machine deletes it, but not the directory of a worker still running,
// and deletes its own when it ends.
func TestCheckpointDirsOfKilledWorkersAreDeleted(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	old := time.Now().Add(-time.Hour)
	mkRoot := func(name string) string {
		root := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(root, "task-1"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "task-1", "model.pt"), []byte("weights"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "lock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(root, old, old); err != nil {
			t.Fatal(err)
		}
		return root
	}
	dead := mkRoot("jobq-checkpoints-111")
	live := mkRoot("jobq-checkpoints-222")
	f, err := os.Open(filepath.Join(live, "lock")) // as its worker holds it
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(live, old, old); err != nil {
		t.Fatal(err)
	}

	b := setupCheckpoints(t)
	push(t, b.q, &jobq.Task{Command: `ls -d "$JOBQ_CHECKPOINT_DIR" >/dev/null && echo x > "$JOBQ_CHECKPOINT_DIR/x"`})
	w := worker.New(b.q, worker.NewShell(), worker.Options{Logger: quietLog(), Checkpoints: true, Poll: 50 * time.Millisecond})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := w.Counts(); c.Done != 1 {
		t.Fatalf("counts %+v; want the task done", c)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the killed worker's checkpoint directory %s is still there (%v)", dead, err)
	}
	if _, err := os.Stat(filepath.Join(live, "task-1", "model.pt")); err != nil {
		t.Errorf("the live worker's checkpoint directory was touched: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "jobq-checkpoint*"))
	if len(left) != 1 || left[0] != live {
		t.Errorf("after Run, %v in TMPDIR; want only the live worker's %s", left, live)
	}
}
