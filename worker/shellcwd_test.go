package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/worker"
)

// TestUnusableCwdIsReportedAsTheCwd: a shell task whose working directory
// does not exist, or is a file, fails with a reason that names its cwd. It
// used to say "starting bash: fork/exec /usr/bin/bash: no such file or
// directory", as if bash were missing.
func TestUnusableCwdIsReportedAsTheCwd(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cwd string
	}{
		{"missing directory", filepath.Join(t.TempDir(), "missing")},
		{"a file", file},
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		for _, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				q := engines.Open(t, engines.URLs(t, "cwd-"+strings.ReplaceAll(tt.name, " ", "-"))[engine])
				id := pushOne(t, q, &jobq.Task{Command: "true", Cwd: tt.cwd})
				w := worker.New(q, worker.NewShell(), worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
				if err := w.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				r := result(t, q, id)
				if r.State != driver.ResultDeadLettered || !strings.Contains(r.Error, "working directory") || !strings.Contains(r.Error, tt.cwd) || strings.Contains(r.Error, "bash") {
					t.Fatalf("record %s %q; want dead-lettered with a reason naming the cwd %s, not bash", r.State, r.Error, tt.cwd)
				}
			})
		}
	}
}
