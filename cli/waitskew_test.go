package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
)

// TestPushWaitWithWorkerClockBehind: push --wait counted only ends
// recorded no earlier than a second before the push, by the clock of the
// worker that recorded them, so with a worker 30 s behind it waited until
// its timeout for tasks that had ended. It ends now with their outcomes:
// the new run's of a task pushed again after an earlier run, and a fresh
// task's.
func TestPushWaitWithWorkerClockBehind(t *testing.T) {
	t.Parallel()
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=waitskew"
	// The earlier run of "echo again" (--wait gives it its ID), on time.
	if code, _, errOut := run(t, q, "push", "--wait", "--wait-timeout", "1s", "-c", "echo again"); code != cli.ExitFailure {
		t.Fatalf("push --wait without a worker: exit %d: %s; want a timeout", code, errOut)
	}
	if code, _, errOut := run(t, q, "worker"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	type outcome struct {
		code        int
		out, errOut string
	}
	done := make(chan outcome, 1)
	go func() {
		code, out, errOut := run(t, q, "push", "--wait", "--wait-timeout", "20s", "-c", "echo again", "-c", "echo fresh")
		done <- outcome{code, out, errOut}
	}()
	settleBehind(t, q, 2, func(body string) driver.ResultState {
		if strings.Contains(body, "again") {
			return driver.ResultDeadLettered
		}
		return driver.ResultSucceeded
	})
	got := <-done
	if got.code != cli.ExitFailure || strings.Count(got.out, " succeeded") != 1 || strings.Count(got.out, " dead-lettered") != 1 ||
		!strings.Contains(got.errOut, "1 of 2 tasks did not succeed (1 dead-lettered)") {
		t.Fatalf("push --wait, the worker 30 s behind: exit %d, stdout %q, stderr %q; want the new run dead-lettered and the fresh task succeeded", got.code, got.out, got.errOut)
	}
}

// settleBehind acts as a worker whose clock is 30 s behind: it receives n
// tasks of queue url and completes each with a record in the state
// stateOf gives its body, stamped by that clock.
func settleBehind(t *testing.T, url string, n int, stateOf func(body string) driver.ResultState) {
	t.Helper()
	qq, err := jobq.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer qq.Close()
	d := hooks.Driver(qq)
	deadline := time.Now().Add(time.Minute)
	for n > 0 && time.Now().Before(deadline) {
		recv, err := d.Receive(t.Context(), driver.ReceiveParams{Max: n, Visibility: time.Minute, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recv {
			rec := &driver.ResultRecord{ID: r.ID, State: stateOf(string(r.Body)), UpdatedAt: time.Now().Add(-30 * time.Second), ExpiresAt: time.Now().Add(time.Hour)}
			if errs := d.Complete(t.Context(), []driver.CompleteParams{{Lease: r.Lease, Result: rec}}); errs != nil && errs[0] != nil {
				t.Fatal(errs[0])
			}
			n--
		}
	}
	if n > 0 {
		t.Fatalf("%d tasks not received within a minute", n)
	}
}
