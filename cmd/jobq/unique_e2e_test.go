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

// TestPushUniqueForNeedsRecords: where the backend keeps no result
// records, push --unique-for is refused before anything is pushed,
// naming why.
func TestPushUniqueForNeedsRecords(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.queue = "mem://unique?unsupported=results"
	r := b.run("push", "-c", "echo x", "--unique-for", "24h")
	if r.code != 2 || !strings.Contains(r.stderr, "push --unique-for needs result records, which this backend does not keep") {
		t.Errorf("push --unique-for without records exited %d; want 2 naming the missing records\n%s", r.code, r.stderr)
	}
}
