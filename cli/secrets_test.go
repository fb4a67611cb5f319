package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jobq/jobq/backends/all"
	"github.com/jobq/jobq/cli"
)

// TestSecretsNeverPrinted: whatever the command line, no password, key or
// signature from it reaches the output. Each of these printed the secret
// before every message went through redact.String.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "S3CRETpw"
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"URL after the command", []string{"size", "postgres://u:" + secret + "@127.0.0.1/test"}, cli.ExitUsage},
		{"scheme typo without colon", []string{"postgres//u:" + secret + "@127.0.0.1/test", "size"}, cli.ExitUsage},
		{"scheme typo with one slash", []string{"redis:/:" + secret + "@127.0.0.1", "size"}, cli.ExitUsage},
		{"help topic", []string{"help", "postgres://u:" + secret + "@h/db"}, cli.ExitOK},
		{"two queues", []string{"postgres://u:" + secret + "@h/db", "--queue", "redis://:" + secret + "@h", "size"}, cli.ExitUsage},
		{"SAS in a connection string", []string{"azqueue://acct/myqueue", "--conn-str",
			"QueueEndpoint=https://acct.queue.core.windows.net/?sv=2022-11-02&sig=" + secret + ";AccountName", "size"}, cli.ExitUsage},
		{"account key in a connection string", []string{"azqueue://acct/myqueue", "--conn-str",
			"AccountName=acct;AccountKey=" + secret + ";Bogus", "size"}, cli.ExitUsage},
		{"password parameter", []string{"postgres://127.0.0.1/test?password=" + secret + "&bogus=1", "size"}, cli.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if strings.Contains(stdout+stderr, secret) {
				t.Fatalf("the secret was printed:\nstdout: %s\nstderr: %s", stdout, stderr)
			}
		})
	}
}

// TestWorkerWithholdsSecretsFromTasks: a task sees neither the worker's
// JOBQ_* settings nor its credentials (PGPASSWORD, AZURE_*) unless the
// worker passes them with --pass-env. Not parallel: it sets the process's
// environment.
func TestWorkerWithholdsSecretsFromTasks(t *testing.T) {
	dir := t.TempDir()
	q := "sqlite://" + filepath.Join(dir, "q.db") + "?queue=env"
	t.Setenv("JOBQ_QUEUE", q)
	t.Setenv("PGPASSWORD", "PW")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=a;AccountKey=K")
	t.Setenv("MY_SETTING", "kept")
	t.Setenv("JOBQ_CONNECTION_STRING", "AccountName=a;AccountKey=K2")
	for _, tt := range []struct {
		pass       []string
		want, gone []string
	}{
		{nil, []string{"MY_SETTING=kept", "JOBQ_TASK_ID=", "JOBQ_QUEUE_NAME=env"}, []string{"PGPASSWORD", "AZURE_STORAGE", "JOBQ_QUEUE="}},
		{[]string{"--pass-env", "PGPASSWORD", "--pass-env", "JOBQ_Q*"}, []string{"PGPASSWORD=PW", "JOBQ_QUEUE=sqlite"}, []string{"AZURE_STORAGE"}},
	} {
		out := filepath.Join(dir, "env.txt")
		if code, _, stderr := run(t, "push", "-c", "env > "+out); code != 0 {
			t.Fatalf("push: exit %d: %s", code, stderr)
		}
		if code, _, stderr := run(t, append([]string{"worker"}, tt.pass...)...); code != 0 {
			t.Fatalf("worker: exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		env := "\n" + string(b)
		for _, w := range tt.want {
			if !strings.Contains(env, "\n"+w) {
				t.Errorf("with %v the task lacks %s", tt.pass, w)
			}
		}
		for _, g := range append(tt.gone, "JOBQ_CONNECTION_STRING") {
			if strings.Contains(env, "\n"+g) {
				t.Errorf("with %v the task got %s", tt.pass, g)
			}
		}
	}
	if code, _, stderr := run(t, "worker", "--pass-env", "A=B"); code != cli.ExitUsage || !strings.Contains(stderr, "--pass-env") {
		t.Errorf("--pass-env A=B: exit %d, %s", code, stderr)
	}
}
