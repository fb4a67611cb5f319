package worker_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
	"github.com/jobq/jobq/worker"
)

// TestCheckpointSavedAtStopSaysStopped: what a task's SIGTERM trap writes
// as the worker stops is saved, and the log says why: the stop, not that
// the task "ended without success".
func TestCheckpointSavedAtStopSaysStopped(t *testing.T) {
	t.Parallel()
	b := setupCheckpoints(t)
	ready := filepath.Join(t.TempDir(), "ready")
	push(t, b.q, &jobq.Task{Command: `trap 'echo last > "$JOBQ_CHECKPOINT_DIR/state"; exit 143' TERM
touch ` + ready + `
while :; do sleep 0.05; done`})
	var out syncbuf.Buffer
	w := worker.New(b.q, &worker.Shell{KillTimeout: 30 * time.Second}, worker.Options{Logger: slog.New(slog.NewTextHandler(&out, nil)),
		Checkpoints: true, Poll: 50 * time.Millisecond})
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.Stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	text := out.String()
	var saved string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "checkpoint saved") {
			saved = line
		}
	}
	if saved == "" {
		t.Fatalf("no checkpoint saved at the stop; log:\n%s", text)
	}
	if strings.Contains(saved, "without success") || !strings.Contains(saved, "stop") {
		t.Errorf("the save at the stop says %q; want the stop as its reason", saved)
	}
}
