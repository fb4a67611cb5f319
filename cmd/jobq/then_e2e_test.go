package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
)

// holdsTasks reports whether the bench's backend declares dependencies.
func (b *bench) holdsTasks() bool {
	b.t.Helper()
	q, err := jobq.Open(context.Background(), b.queue)
	if err != nil {
		b.t.Fatalf("open %s: %v", b.queue, err)
	}
	defer q.Close()
	return q.Capabilities().Level(driver.Dependencies) != driver.Unsupported
}

// groupDoc runs `group NAME --json`.
func (b *bench) groupDoc(name string) map[string]any {
	b.t.Helper()
	r := b.must("group", name, "--json")
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		b.t.Fatalf("group --json printed %q: %v", r.stdout, err)
	}
	return m
}

// TestGroupStepAfterSettlerKilled: the worker that settles a group's last
// task is SIGKILLed before it sweeps (it runs with --no-schedules, so it
// never would); the step stays held, and another process's sweep
// (scheduler --once) releases it, once.
func TestGroupStepAfterSettlerKilled(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	if !b.holdsTasks() {
		t.Skip("the sqlite backend declares dependencies unsupported: the step cannot be held")
	}
	b.must("push", "--group", "g", "-c", "echo one", "-c", "echo two", "--then", "echo step >> step.txt")
	p := b.start(nil, "worker", "--wait", "--no-schedules")
	deadline := time.Now().Add(60 * time.Second)
	for b.groupDoc("g")["done"] != true {
		if time.Now().After(deadline) {
			t.Fatalf("the group did not end within a minute:\n%s", p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.signal(syscall.SIGKILL)
	p.wait()
	if st, _ := b.groupDoc("g")["step"].(map[string]any); st["state"] != "held" {
		t.Fatalf("the step after the settler was killed: %v; want held", st)
	}
	r := b.must("scheduler", "--once")
	if want := "released held task " + jobq.ThenTaskID("g"); !strings.Contains(r.stdout, want) {
		t.Fatalf("scheduler --once printed %q; want %q", r.stdout, want)
	}
	if r := b.must("scheduler", "--once"); strings.Contains(r.stdout, "released") {
		t.Errorf("a second scheduler --once released again: %q", r.stdout)
	}
	b.must("worker")
	if got, err := os.ReadFile(filepath.Join(b.dir, "step.txt")); err != nil || string(got) != "step\n" {
		t.Errorf("the step wrote %q (%v); want it once", got, err)
	}
}
