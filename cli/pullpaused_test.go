package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
)

// TestPullStoppedOnPausedQueue: a pull waiting on a paused queue that
// holds a task, then stopped, must not say the queue is empty.
func TestPullStoppedOnPausedQueue(t *testing.T) {
	t.Parallel()
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=paused"
	if code, _, errOut := run(t, q, "push", "-c", "true"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, q, "pause"); code != 0 {
		t.Fatalf("pause: exit %d: %s", code, errOut)
	}
	code, stderr := runStoppedAt(t, []string{q, "pull"}, "the queue is paused")
	t.Logf("exit %d; stderr:\n%s", code, stderr)
	if strings.Contains(stderr, "queue is empty") {
		t.Errorf("a stopped pull on a paused queue holding a task said the queue is empty; stderr:\n%s", stderr)
	}
	if code, out, _ := run(t, q, "size"); code != 0 || !strings.Contains(out, "1") {
		t.Errorf("size after the pull: exit %d, %q; want the task still queued", code, out)
	}
}

// TestPullOnEmptyQueue: a pull that finds no task says the queue is empty
// and exits 0; the worker's end reason is what tells it so.
func TestPullOnEmptyQueue(t *testing.T) {
	t.Parallel()
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=empty"
	code, _, stderr := run(t, q, "pull")
	if code != 0 || !strings.Contains(stderr, "queue is empty: nothing to pull") {
		t.Errorf("pull on an empty queue: exit %d, want 0, saying the queue is empty; stderr:\n%s", code, stderr)
	}
}

// runStoppedAt runs the command args and stops it (cancels its context)
// once its standard error holds at; at "" it is not stopped. It returns
// the exit code and the standard error.
func runStoppedAt(t *testing.T, args []string, at string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- cli.Run(ctx, args, strings.NewReader(""), &out, &errOut) }()
	if at != "" {
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(errOut.String(), at) {
			if time.Now().After(deadline) {
				t.Fatalf("%q never showed; stderr:\n%s", at, errOut.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}
	select {
	case code := <-done:
		return code, errOut.String()
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not end", args)
	}
	return 0, ""
}
