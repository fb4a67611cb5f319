package main_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelpExamplesRunOnSQLite runs every example of jobq --help and of
// each command's --help that uses sqlite://./work.db (or no queue), as
// written, through bash, each in a fresh directory holding a queue with
// one task in group sweep-1 and the files examples read (commands.txt,
// sweep.txt, ids.txt with that task's ID). None may be refused as a usage error (exit 2) or fail to
// start; an example that names a task ID of its own may end with exit 1
// (not found). Examples that wait or serve until stopped are left out.
func TestHelpExamplesRunOnSQLite(t *testing.T) {
	t.Parallel()
	_, hasJQ := exec.LookPath("jq")
	path := filepath.Dir(jobqBin) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, ex := range helpExamples(t) {
		if !strings.HasPrefix(ex, "jobq ") && !strings.HasPrefix(ex, "seq ") && !strings.HasPrefix(ex, "echo ") && !strings.HasPrefix(ex, "JOBQ_QUEUE=") {
			continue // another program's (duckdb's) example
		}
		if !strings.Contains(ex, "sqlite://./work.db") && ex != "jobq backends" && ex != "jobq version" {
			continue
		}
		if strings.Contains(ex, "| jq") && hasJQ != nil {
			continue
		}
		if blocks(ex) {
			continue
		}
		t.Run(ex, func(t *testing.T) {
			t.Parallel()
			b := newBench(t)
			b.queue = "sqlite://./work.db"
			ids := b.must("-q", "push", "--group", "sweep-1", "--print-ids", "-c", "echo seed").stdout
			for name, text := range map[string]string{"commands.txt": "echo a\necho b\n", "sweep.txt": "echo a\n", "ids.txt": ids} {
				if err := os.WriteFile(filepath.Join(b.dir, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", ex)
			cmd.Dir = b.dir
			cmd.Env = append(append([]string{}, b.env...), "PATH="+path)
			cmd.WaitDelay = time.Second
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &exit) && exit.ExitCode() == 1:
			default:
				t.Errorf("%s: %v; want it to run (exit 0, or 1 for an ID of its own):\n%s", ex, err, out)
			}
		})
	}
}

// blocks reports whether the example ex runs until it is stopped: it
// waits for tasks no worker runs, serves, or samples for long.
func blocks(ex string) bool {
	for _, s := range []string{" --wait", " wait ", " dashboard", " pull", "--sample 30s"} {
		if strings.Contains(ex, s) {
			return true
		}
	}
	return strings.Contains(ex, " scheduler") && !strings.Contains(ex, "--once")
}

// helpExamples returns the example lines of jobq --help and of every
// command's and sub-command's --help.
func helpExamples(t *testing.T) []string {
	t.Helper()
	var out []string
	var walk func(path []string)
	walk = func(path []string) {
		help, err := exec.CommandContext(t.Context(), jobqBin, append(path, "--help")...).Output()
		if err != nil {
			t.Fatalf("jobq %s --help: %v", strings.Join(path, " "), err)
		}
		section := ""
		for _, line := range strings.Split(string(help), "\n") {
			switch {
			case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
				section = line
			case strings.TrimSpace(line) == "":
				if section == "Examples:" {
					section = ""
				}
			case section == "Examples:":
				out = append(out, strings.TrimSpace(line))
			case section == "Available Commands:":
				if name := strings.Fields(line)[0]; name != "help" && name != "completion" {
					walk(append(append([]string{}, path...), name))
				}
			}
		}
	}
	walk(nil)
	return out
}
