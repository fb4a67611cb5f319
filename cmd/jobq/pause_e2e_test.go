package main_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestPauseStopsADrainingQueue pauses a queue a worker is draining: no
// task starts once the pause took effect (driver.PauseRefresh after the
// command, plus a margin), stats and workers say who paused it, pushes
// still go in, and after resume every task runs exactly once.
func TestPauseStopsADrainingQueue(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	starts := filepath.Join(b.dir, "starts")
	const n = 30
	var args []string
	for i := range n {
		args = append(args, "-c", fmt.Sprintf("echo %d $(date +%%s%%N) >> %s; sleep 0.5", i, starts))
	}
	b.must(append([]string{"push"}, args...)...)
	w := b.start(nil, "worker", "-n", "2")
	deadline := time.Now().Add(30 * time.Second)
	for len(readLines(t, starts)) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the worker started no tasks:\n%s", w.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := b.must("pause")
	if !strings.Contains(r.stdout, "paused the whole queue (by ") {
		t.Errorf("pause printed %q", r.stdout)
	}
	effective := time.Now().Add(driver.PauseRefresh + 1500*time.Millisecond)
	b.must("push", "-c", fmt.Sprintf("echo %d $(date +%%s%%N) >> %s", n, starts)) // pushes still go in
	time.Sleep(time.Until(effective) + 3*time.Second)

	lines := readLines(t, starts)
	begun := len(lines) / 2
	for i := 1; i < len(lines); i += 2 {
		ns, err := strconv.ParseInt(lines[i], 10, 64)
		if err != nil {
			t.Fatalf("starts file: %v", err)
		}
		if at := time.Unix(0, ns); at.After(effective) {
			t.Errorf("task %s started %v after the pause took effect", lines[i-1], at.Sub(effective))
		}
	}
	if begun >= n {
		t.Fatalf("all %d tasks started before the pause; make them slower", begun)
	}
	for _, cmd := range [][]string{{"stats", "--sample", "0"}, {"workers"}} {
		if out := b.must(cmd...).stdout; !strings.Contains(out, "paused") || !strings.Contains(out, "the whole queue since") || !strings.Contains(out, " by ") {
			t.Errorf("%s does not say the queue is paused, since when and by whom:\n%s", cmd[0], out)
		}
	}

	if r := b.must("resume"); !strings.Contains(r.stdout, "resumed the whole queue") {
		t.Errorf("resume printed %q", r.stdout)
	}
	if code := w.wait(); code != 0 {
		t.Fatalf("worker exited %d:\n%s", code, w.output())
	}
	seen := map[string]int{}
	lines = readLines(t, starts)
	for i := 0; i < len(lines); i += 2 {
		seen[lines[i]]++
	}
	for i := range n + 1 {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("task %d started %d times, want once", i, c)
		}
	}
	if out := b.must("stats", "--sample", "0").stdout; strings.Contains(out, "paused") {
		t.Errorf("stats still says paused after resume:\n%s", out)
	}
}

// TestPauseOneKey pauses the tasks of one concurrency key: the worker runs
// the others and leaves the paused ones queued until they are resumed.
func TestPauseOneKey(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	ran := filepath.Join(b.dir, "ran")
	b.must("pause", "--key", "render")
	b.must("push", "--concurrency-key", "render", "-c", "echo render >> "+ran)
	b.must("push", "--rate-limit-key", "mail", "-c", "echo mail >> "+ran)
	w := b.start(nil, "worker", "--wait")
	deadline := time.Now().Add(30 * time.Second)
	for len(readLines(t, ran)) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the worker ran nothing:\n%s", w.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * driver.PauseRefresh)
	if got := readLines(t, ran); strings.Join(got, " ") != "mail" {
		t.Fatalf("with key render paused the worker ran %v, want only mail", got)
	}
	if out := b.must("stats", "--sample", "0").stdout; !strings.Contains(out, "key render since") {
		t.Errorf("stats does not show the paused kind:\n%s", out)
	}
	if r := b.run("resume"); r.code != 0 || !strings.Contains(r.stdout, "was not paused") {
		t.Errorf("resume of the whole queue = %d %q; want exit 0 and 'was not paused'", r.code, r.stdout)
	}
	b.must("resume", "--key", "render")
	deadline = time.Now().Add(30 * time.Second)
	for len(readLines(t, ran)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the render task did not run after resume:\n%s", w.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
