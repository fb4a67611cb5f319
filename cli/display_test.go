package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestOneRow(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"echo hi\n", "echo hi"},
		{"echo hi\r\n", "echo hi"},
		{"a\nb\n", `a\nb`},
		{"a\tb", `a\tb`},
		{"bell\a", `bell\a`},
		{"日本語", "日本語"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := oneRow(tt.in); got != tt.want {
			t.Errorf("oneRow(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTruncateKeepsCharactersWhole(t *testing.T) {
	t.Parallel()
	for n := 4; n < 20; n++ {
		got := truncate(strings.Repeat("日本語", 10), n)
		if !utf8.ValidString(got) || len(got) > n {
			t.Errorf("truncate(…, %d) = %q: want valid UTF-8 of at most %d bytes", n, got, n)
		}
	}
}

// inspect runs `jobq QUEUE ARGS` in-process and returns its stdout.
func inspect(t *testing.T, queue string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := Run(context.Background(), append([]string{queue}, args...), strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("jobq %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

// TestPeekAndShowOfStdinTasks: tasks read from standard input keep their
// newline, which peek's table and show's rows must not print raw.
func TestPeekAndShowOfStdinTasks(t *testing.T) {
	t.Parallel()
	code, _, stderr, q := pushRun(t, "echo one\necho two\n")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	peek := inspect(t, q, "peek", "-n", "5")
	lines := strings.Split(strings.TrimSuffix(peek, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("peek printed %d lines, want a header and 2 rows:\n%s", len(lines), peek)
	}
	col := strings.Index(lines[0], "TASK")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], "echo ") {
			t.Errorf("peek row %q: the task is not under TASK (column %d):\n%s", l, col, peek)
		}
	}
	id := strings.Fields(lines[1])[0]
	show := inspect(t, q, "show", id)
	if strings.Contains(show, "echo one\n\n") || !strings.Contains(show, "echo one\n") {
		t.Errorf("show prints the command's newline raw:\n%s", show)
	}
}

// TestPeekOfStashedTask: a stashed task's row names its stash object, not
// the empty kwargs its message carries.
func TestPeekOfStashedTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := "sqlite://" + filepath.Join(dir, "q.db") + "?queue=big&max_message_bytes=65536&stash=file://" + filepath.Join(dir, "stash")
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{q, "push", "-c", "echo " + strings.Repeat("x", 70000)}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("push: exit %d: %s", code, errb.String())
	}
	peek := inspect(t, q, "peek")
	if !strings.Contains(peek, "(stashed, 68.5 KiB: file://") || strings.Contains(peek, "{}") {
		t.Errorf("peek of a stashed task:\n%s\nwant its stash object named, not {}", peek)
	}
}

func TestProgressText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n       int
		elapsed time.Duration
		want    string
	}{
		{0, 0, "pushed 0 tasks"},
		{1000, 4 * time.Microsecond, "pushed 1000 tasks"},
		{1, 999 * time.Millisecond, "pushed 1 task"},
		{5000, 2 * time.Second, "pushed 5000 tasks, 2500 tasks/s"},
	}
	for _, tt := range tests {
		if got := progressText(tt.n, tt.elapsed); got != tt.want {
			t.Errorf("progressText(%d, %v) = %q, want %q", tt.n, tt.elapsed, got, tt.want)
		}
	}
}

// TestPushResumeHint: a push stopped at a bad line says how to resume it
// with the real queue, input file and flags, not placeholders.
func TestPushResumeHint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := "sqlite://" + filepath.Join(dir, "q.db") + "?queue=resume"
	input := filepath.Join(dir, "tasks.txt")
	if err := os.WriteFile(input, []byte("echo 1\necho 2\necho \xff\necho 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	args := []string{q, "push", "--num-retries", "2", "-e", "API_TOKEN=hunter2", "-e", "MODE=fast"}
	for _, tt := range []struct {
		name  string
		stdin io.Reader
		want  string
	}{
		{"from a file", f, "resume with: tail -n +3 " + input + " | jobq '" + q + "' push --env=API_TOKEN=xxxxx --env=MODE=fast --num-retries=2"},
		{"from a pipe", strings.NewReader("echo 1\necho 2\necho \xff\n"), "resume with: (the same input) | tail -n +3 | jobq '" + q + "' push --env="},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, tt.stdin, &out, &errb)
		if code != ExitUsage || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and %q", tt.name, code, errb.String(), ExitUsage, tt.want)
		}
		if strings.Contains(errb.String(), "hunter2") || strings.Contains(errb.String(), "QUEUE") || strings.Contains(errb.String(), "INPUT") {
			t.Errorf("%s: stderr shows a secret or a placeholder:\n%s", tt.name, errb.String())
		}
	}
}
