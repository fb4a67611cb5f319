package worker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/wire"
	"github.com/jobq/jobq/worker"
)

// ai4sTask decodes a message as ai4s-jobq pushes it, with kwargs kw.
func ai4sTask(t *testing.T, kw string) *jobq.Task {
	t.Helper()
	task, err := wire.Unmarshal([]byte(`{"version": 1, "reply_requested": false, "kwargs": ` + strconv.Quote(kw) + `, "num_retries": 0, "id": "tid"}`))
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestShellBgDirSync(t *testing.T) {
	t.Parallel()
	dst := filepath.Join(t.TempDir(), "out")
	cmd := `mkdir -p "$AMLT_DIRSYNC_DIR/sub" && echo result > "$AMLT_DIRSYNC_DIR/sub/r.txt" && echo tmp > "$AMLT_DIRSYNC_DIR/x.tmp" && echo $AMLT_DIRSYNC_DIR > ` + filepath.Join(filepath.Dir(dst), "dir")
	kw := `{"cmd": ` + strconv.Quote(cmd) + `, "bg_dirsync_to": ` + strconv.Quote(dst) + `, "env": {"AMLT_DIRSYNC_EXCLUDE": "*.tmp"}}`
	task := ai4sTask(t, kw)
	if task.DirSyncTo != dst {
		t.Fatalf("DirSyncTo %q; want %q", task.DirSyncTo, dst)
	}
	if err := worker.NewShell().Handle(context.Background(), &worker.Job{Task: task, Log: quietLog(), QueueName: "q"}); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "r.txt")); err != nil || string(b) != "result\n" {
		t.Errorf("synced file: %q, %v; want the task's output", b, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "x.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("excluded file was copied (stat: %v)", err)
	}
	dir, _ := os.ReadFile(filepath.Join(filepath.Dir(dst), "dir"))
	if d := strings.TrimSpace(string(dir)); d == "" {
		t.Error("the task had no $AMLT_DIRSYNC_DIR")
	} else if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the task's directory %s is left behind (stat: %v)", d, err)
	}
}

func TestShellBgDirSyncRemoteFails(t *testing.T) {
	t.Parallel()
	task := ai4sTask(t, `{"cmd": "true", "bg_dirsync_to": "gs://bucket/out", "env": {}}`)
	err := worker.NewShell().Handle(context.Background(), &worker.Job{Task: task, Log: quietLog(), QueueName: "q"})
	var te *worker.TaskError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "only local directories") {
		t.Errorf("Handle: %v; want a TaskError saying only local directories are supported", err)
	}
}

// ai4s-jobq pushes an empty -c command and its workers run it: bash does nothing
// and succeeds.
func TestShellRunsEmptyCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"", "\n", "  \n"} {
		task := ai4sTask(t, `{"cmd": `+strconv.Quote(cmd)+`, "bg_dirsync_to": null, "env": {}}`)
		if err := worker.NewShell().Handle(context.Background(), &worker.Job{Task: task, Log: quietLog(), QueueName: "q"}); err != nil {
			t.Errorf("command %q: %v", cmd, err)
		}
	}
}
