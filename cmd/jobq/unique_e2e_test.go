package main_test

import (
	"strings"
	"testing"
	"time"
)

// TestPushUniqueFor: push --unique-for refuses a task that is queued or
// ended within the window as a duplicate (exit 0, duplicates=1, nothing
// queued), and queues it again once the window has passed.
func TestPushUniqueFor(t *testing.T) {
	t.Parallel()
	for name, setup := range resultBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBench(t)
			setup(b)
			requireResults(b)
			task := "echo unique-" + name
			push := func(window string) (dup bool, stderr string) {
				t.Helper()
				r := b.must("push", "-c", task, "--unique-for", window, "--print-ids", "--json")
				return strings.Contains(r.stdout, `"duplicate":true`), r.stderr
			}
			if dup, errs := push("1h"); dup {
				t.Fatalf("the first push is a duplicate:\n%s", errs)
			}
			if dup, errs := push("1h"); !dup || !strings.Contains(errs, "duplicates=1") {
				t.Errorf("a push while the task is queued is not a duplicate (the backend's dedup):\n%s", errs)
			}
			b.must("worker")
			if got := b.size(); got != "0" {
				t.Fatalf("size after the worker ran the task = %s; want 0", got)
			}
			if dup, errs := push("1h"); !dup || !strings.Contains(errs, "duplicates=1") {
				t.Errorf("a push within the window after the task ran is not a duplicate:\n%s", errs)
			}
			if got := b.size(); got != "0" {
				t.Errorf("size after a push within the window = %s; want 0 (nothing queued)", got)
			}
			time.Sleep(1100 * time.Millisecond)
			if dup, errs := push("1s"); dup || !strings.Contains(errs, "duplicates=0") {
				t.Errorf("a push after the window elapsed is a duplicate:\n%s", errs)
			}
			if got := b.size(); got != "1" {
				t.Errorf("size after a push past the window = %s; want 1", got)
			}
		})
	}
}

// TestPushUniqueForLimits: where the backend keeps no result records,
// push --unique-for is refused before anything is pushed, naming why;
// where it does not dedup task IDs, the push goes on with a warning that
// a task still queued is queued again.
func TestPushUniqueForLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, queue string
		code        int
		stderr      string
	}{
		{"no records", "mem://unique?unsupported=results", 2, "push --unique-for needs result records, which this backend does not keep"},
		{"no dedup", "mem://unique?unsupported=dedup", 0, "a task still queued or running is queued again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBench(t)
			b.queue = tc.queue
			r := b.run("push", "-c", "echo x", "--unique-for", "24h")
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("push --unique-for exited %d; want %d saying %q\n%s", r.code, tc.code, tc.stderr, r.stderr)
			}
		})
	}
}
