package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStartCheckTakesMissingSQLiteFileAsEmpty: the documented first run,
// `go run ./tools/chaos -queue 'sqlite:///tmp/chaos.db?queue=c1'`, names
// a file that does not exist yet; the check that the queue is empty takes
// it as empty and creates nothing, while a file that holds a task is
// still counted through the real jobq binary.
func TestStartCheckTakesMissingSQLiteFileAsEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobq := filepath.Join(dir, "jobq")
	if out, err := exec.Command("go", "build", "-o", jobq, "github.com/jobq/jobq/cmd/jobq").CombinedOutput(); err != nil {
		t.Fatalf("build jobq: %v\n%s", err, out)
	}
	held := "sqlite://" + filepath.Join(dir, "held.db") + "?queue=c1"
	if out, err := exec.Command(jobq, held, "push", "-q", "-c", "true").CombinedOutput(); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	missing := filepath.Join(dir, "missing.db")
	tests := []struct {
		name  string
		queue string
		want  int
	}{
		{"missing file", "sqlite://" + missing + "?queue=c1", 0},
		{"file holding a task", held, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &harness{c: config{queue: tt.queue, jobq: jobq}}
			n, err := h.queuedAtStart(context.Background())
			if err != nil || n != tt.want {
				t.Fatalf("queuedAtStart = %d, %v; want %d, nil", n, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the check created %s (stat: %v); want it left to the push", missing, err)
	}
}

// TestSQLitePathReadsURLsAsTheBackendDoes: relative, absolute and opaque
// forms name a file; other schemes and in-memory databases do not.
func TestSQLitePathReadsURLsAsTheBackendDoes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		queue  string
		want   string
		isFile bool
	}{
		{"sqlite:///tmp/chaos.db?queue=c1", "/tmp/chaos.db", true},
		{"sqlite://./work.db?queue=c1", "./work.db", true},
		{"sqlite:work.db", "work.db", true},
		{"sqlite://:memory:", ":memory:", false},
		{"postgres://postgres@127.0.0.1:5432/test?queue=c1", "", false},
	}
	for _, tt := range tests {
		got, ok := sqlitePath(tt.queue)
		if ok != tt.isFile || (ok && got != tt.want) {
			t.Errorf("sqlitePath(%q) = %q, %v; want %q, %v", tt.queue, got, ok, tt.want, tt.isFile)
		}
	}
}
