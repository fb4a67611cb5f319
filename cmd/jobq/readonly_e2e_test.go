//go:build linux

package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobq/jobq/tools/testkit/diskfull"
)

// TestReadCommandsWhereWritesFail: size, stats, peek and dlq list read a
// queue whose file cannot be written: on a full disk, with or without
// another process holding the file open, and on a read-only filesystem.
func TestReadCommandsWhereWritesFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// block makes writes fail; the function it returns undoes that.
		block func(t *testing.T, dir string) func()
	}{
		{"full disk", func(t *testing.T, dir string) func() {
			f := diskfull.Fill(t, dir)
			return func() { _ = os.Remove(f) }
		}},
		{"full disk, file open elsewhere", func(t *testing.T, dir string) func() {
			unpin := diskfull.PinWAL(t, filepath.Join(dir, "q.db"))
			f := diskfull.Fill(t, dir)
			return func() { unpin(); _ = os.Remove(f) }
		}},
		{"read-only filesystem", func(t *testing.T, dir string) func() {
			diskfull.ReadOnly(t, dir)
			return func() { diskfull.Writable(t, dir) }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBench(t)
			dir := b.onSmallDisk()
			b.must("push", "-c", "echo one")
			b.must("push", "-c", "echo two", "--delay", "1h")
			ids := b.peekIDs()
			t.Cleanup(tt.block(t, dir))

			if s := b.size(); s != "2" {
				t.Errorf("size %s; want 2", s)
			}
			if s := b.stats(); s["ready"] != 1 || s["delayed"] != 1 {
				t.Errorf("stats %v; want 1 ready, 1 delayed", s)
			}
			if got := b.peekIDs(); len(got) != 2 || got[0] != ids[0] {
				t.Errorf("peek lists %v; want %v", got, ids)
			}
			if r := b.must("dlq", "list"); !strings.Contains(r.stdout, "no dead letters") && strings.TrimSpace(r.stdout) != "" {
				t.Errorf("dlq list printed %q; want no dead letters", r.stdout)
			}
		})
	}
}

// TestReadCommandOnMissingFile: a read of a queue file that does not exist
// says so and creates nothing.
func TestReadCommandOnMissingFile(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	path := filepath.Join(b.dir, "typo.db")
	b.queue = "sqlite://" + path + "?queue=e2e"
	for _, args := range [][]string{{"size"}, {"stats"}, {"peek"}} {
		r := b.run(args...)
		if r.code == 0 || !strings.Contains(r.stderr, "does not exist") {
			t.Errorf("jobq %v on a missing file exited %d, stderr %q; want an error saying it does not exist", args, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a read created %s (stat: %v)", path, err)
	}
}
