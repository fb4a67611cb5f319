//go:build linux

package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq/tools/testkit/diskfull"
)

// onSmallDisk points b's queue at a file on a small tmpfs (skipping the
// test without root) and returns the tmpfs's directory.
func (b *bench) onSmallDisk() string {
	b.t.Helper()
	dir := diskfull.SmallDisk(b.t, 4<<20)
	b.queue = "sqlite://" + filepath.Join(dir, "q.db") + "?queue=e2e"
	return dir
}

// peekIDs returns the IDs of the tasks jobq peek --json lists.
func (b *bench) peekIDs() []string {
	b.t.Helper()
	r := b.must("peek", "-n", "10", "--json")
	var msgs []struct {
		Body struct {
			ID string `json:"id"`
		} `json:"body"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &msgs); err != nil {
		b.t.Fatalf("peek --json: %v: %s", err, r.stdout)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.Body.ID
	}
	return ids
}

// TestSIGTERMOnFullDiskExitsWithinKillTimeout: a worker stopped while the
// disk is full cannot requeue its task; it still exits within its
// --kill-timeout (not when the task's lease runs out), names the task it
// leaves, and the task runs again once its lease has expired.
func TestSIGTERMOnFullDiskExitsWithinKillTimeout(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	dir := b.onSmallDisk()
	runs := filepath.Join(b.dir, "runs") // off the full disk
	// The first run waits to be stopped; the next ends at once. The
	// marker is quoted apart so that the logged command does not match.
	b.must("push", "-c", fmt.Sprintf(`echo run >> %[1]s; if [ "$(wc -l < %[1]s)" -eq 1 ]; then echo "wait""ing"; sleep 30; fi`, runs))
	ids := b.peekIDs()

	const killTimeout, visibility = 2 * time.Second, 12 * time.Second
	p := b.start(nil, "worker", "--kill-timeout", killTimeout.String(), "--visibility-timeout", visibility.String())
	p.waitFor("] waiting")
	unpin := diskfull.PinWAL(t, filepath.Join(dir, "q.db"))
	filler := diskfull.Fill(t, dir)
	start := time.Now()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(killTimeout + 2*time.Second):
		t.Fatalf("the worker did not exit within %v of SIGTERM on a full disk (its --kill-timeout is %v):\n%s",
			killTimeout+2*time.Second, killTimeout, p.output())
	}
	elapsed := time.Since(start)
	t.Logf("the worker exited %v after SIGTERM", elapsed.Round(time.Millisecond))
	if elapsed > killTimeout+time.Second {
		t.Errorf("the worker exited %v after SIGTERM; want within its --kill-timeout %v", elapsed, killTimeout)
	}
	out := p.output()
	if !strings.Contains(out, "will be delivered again") || !strings.Contains(out, ids[0]) {
		t.Errorf("the log does not say that task %s will be delivered again:\n%s", ids[0], out)
	}

	unpin()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(visibility + 10*time.Second)
	for b.stats()["ready"] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the task was not ready again after its lease; stats %v", b.stats())
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.must("worker")
	if got := readLines(t, runs); len(got) != 2 {
		t.Errorf("the task ran %d times; want twice (stopped, then again after its lease)", len(got))
	}
	if s := b.size(); s != "0" {
		t.Errorf("size %s after the second worker; want 0", s)
	}
}
