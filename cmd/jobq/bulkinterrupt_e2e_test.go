package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// TestRequeueInterruptedSaysWhatItDid: Ctrl-C in the middle of a redrive
// stops it between batches; it prints how many it requeued (exactly as
// many as are queued again), exits 1 saying the rest are unchanged, and a
// second run requeues the rest.
func TestRequeueInterruptedSaysWhatItDid(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	ctx := t.Context()
	q, err := jobq.Open(ctx, b.queue)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const n = 3000
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("echo %d; exit 1", i)}
	}
	if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	for left := n; left > 0; {
		envs, err := q.ReceiveBatch(ctx, 100, jobq.ReceiveOptions{Wait: 5 * time.Second})
		if err != nil || len(envs) == 0 {
			t.Fatalf("dead-lettering: %d left, %v", left, err)
		}
		for _, e := range envs {
			if err := e.DeadLetter(ctx, "failed", ""); err != nil {
				t.Fatal(err)
			}
		}
		left -= len(envs)
	}

	cmd := b.command(context.Background(), "", nil, "requeue", "--batch", "1", "--yes")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ready(t, q) == 0 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the requeue did not begin")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("interrupted requeue ended with %v; want exit 1; stdout %q; stderr %q", err, out.String(), errb.String())
	}
	if want := "the dead letters not counted as requeued above are unchanged; run the command again to finish"; !strings.Contains(errb.String(), want) {
		t.Errorf("stderr %q does not say %q", errb.String(), want)
	}
	m := regexp.MustCompile(`requeued (\d+) of \d+ matching dead letters? \(\d+ scanned\) before it was interrupted`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("stdout %q does not say what the interrupted requeue did", out.String())
	}
	done, _ := strconv.ParseInt(m[1], 10, 64)
	if got := ready(t, q); got != done || done == n {
		t.Fatalf("said it requeued %d; %d are queued again (of %d)", done, got, n)
	}
	r := b.must("requeue", "--yes")
	if want := fmt.Sprintf("requeued %d of %d matching", n-done, n-done); !strings.Contains(r.stdout, want) {
		t.Errorf("second run printed %q; want %q", r.stdout, want)
	}
	if got := ready(t, q); got != n {
		t.Errorf("%d of %d queued again after the second run", got, n)
	}
}

// ready is how many tasks q holds ready.
func ready(t *testing.T, q *jobq.Queue) int64 {
	t.Helper()
	st, err := q.Admin().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Ready
}
