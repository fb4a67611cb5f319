package worker

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestAwaitExitBeforeStop: a main process that had exited by the time the
// stop was seen was not stopped, whichever of the two awaitExit's select
// takes first (it picks at random among ready cases).
func TestAwaitExitBeforeStop(t *testing.T) {
	t.Parallel()
	// A process group of our own for awaitExit to signal, never another's.
	target := exec.Command("sleep", "60")
	target.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-target.Process.Pid, syscall.SIGKILL)
		_ = target.Wait()
	})
	job := &Job{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), kill: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		waited := make(chan error, 1)
		waited <- nil
		stopped, err := awaitExit(ctx, job, procGroup{pgid: target.Process.Pid}, waited, time.Hour, nil)
		if stopped || err != nil {
			t.Fatalf("round %d: awaitExit = %v, %v; want not stopped: the process had exited before the stop", i, stopped, err)
		}
	}
}
