package cli_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jobq/jobq/backends/all"
	"github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/backends/servicebus"
	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/stash/azblob"
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
		{"help topic", []string{"help", "postgres://u:" + secret + "@h/db"}, cli.ExitUsage},
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

// passwordQueue is a Postgres queue URL whose user-info holds a password,
// and the password. Postgres on the test machine trusts local connections,
// so any password opens it; $JOBQ_TEST_POSTGRES_URL may name another
// server (with its own password, if it has one).
func passwordQueue(t *testing.T, name string) (string, string) {
	t.Helper()
	base := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	if s := os.Getenv("JOBQ_TEST_POSTGRES_URL"); s != "" {
		base = s
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok {
		pw = "S3CRETpw"
		u.User = url.UserPassword(u.User.Username(), pw)
	}
	qs := u.Query()
	qs.Set("queue", name+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	u.RawQuery = qs.Encode()
	return u.String(), pw
}

// TestQueueSecretOffTheCommandLine: a queue URL with a password given on
// the command line works and warns (without the password) that ps shows
// it; given with $JOBQ_QUEUE, --queue-file or $JOBQ_QUEUE_FILE it works
// without that warning, for size and for worker, against Postgres. A queue
// file other users can read gets its own warning. (Not parallel: it sets
// the environment.)
func TestQueueSecretOffTheCommandLine(t *testing.T) {
	q, secret := passwordQueue(t, "secret-argv")
	t.Cleanup(func() { run(t, "-q", "--queue", q, "clear", "--yes") })
	dir := t.TempDir()
	private, shared := filepath.Join(dir, "private.url"), filepath.Join(dir, "shared.url")
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{private, 0o600}, {shared, 0o644}} {
		if err := os.WriteFile(f.path, []byte(q+"\n"), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f.path, f.mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	const (
		psWarning   = "the queue URL on the command line holds a password or key, which every local user can read with ps"
		connWarning = "the --conn-str on the command line holds a key"
		fileWarning = "the queue file can be read by other users"
	)
	tests := []struct {
		name      string
		args      []string // before the command
		env       map[string]string
		wantWarns []string
	}{
		{"first argument", []string{q}, nil, []string{psWarning}},
		{"--queue", []string{"--queue", q}, nil, []string{psWarning}},
		{"--conn-str with a key", []string{q, "--conn-str", "AccountName=a;AccountKey=" + secret}, nil, []string{psWarning, connWarning}},
		{"$JOBQ_QUEUE", nil, map[string]string{"JOBQ_QUEUE": q}, nil},
		{"--queue-file", []string{"--queue-file", private}, nil, nil},
		{"$JOBQ_QUEUE_FILE", nil, map[string]string{"JOBQ_QUEUE_FILE": private}, nil},
		{"--queue-file readable by others", []string{"--queue-file", shared}, nil, []string{fileWarning}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"JOBQ_QUEUE", "JOBQ_QUEUE_FILE", "JOBQ_STORAGE_QUEUE"} {
				t.Setenv(k, tt.env[k])
			}
			marker := filepath.Join(t.TempDir(), "ran")
			if code, _, stderr := run(t, "-q", "--queue", q, "push", "-c", "touch '"+marker+"'"); code != 0 {
				t.Fatalf("push: exit %d: %s", code, stderr)
			}
			for _, step := range []struct {
				cmd     []string
				wantOut string
			}{
				{[]string{"size"}, "1"},
				{[]string{"worker"}, ""},
				{[]string{"size"}, "0"},
			} {
				code, stdout, stderr := run(t, append(append([]string{}, tt.args...), step.cmd...)...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", step.cmd, code, stderr)
				}
				if step.wantOut != "" && strings.TrimSpace(stdout) != step.wantOut {
					t.Errorf("%v printed %q; want %s", step.cmd, stdout, step.wantOut)
				}
				if strings.Contains(stdout+stderr, secret) {
					t.Fatalf("%v printed the password:\n%s%s", step.cmd, stdout, stderr)
				}
				for _, w := range []string{psWarning, connWarning, fileWarning} {
					want := 0
					if slices.Contains(tt.wantWarns, w) {
						want = 1
					}
					if got := strings.Count(stderr, w); got != want {
						t.Errorf("%v: %q appears %d times; want %d:\n%s", step.cmd, w, got, want, stderr)
					}
				}
			}
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("the worker did not run the task: %v", err)
			}
		})
	}
}

// TestTaskEnvMasked: peek, show and dlq list print the values of task
// environment variables named like credentials as ****, in text and JSON,
// and in full with --show-secrets; other variables print as they are, and
// the worker runs the task with the real value.
func TestTaskEnvMasked(t *testing.T) {
	t.Parallel()
	const secret = "tok-S3CRET"
	dir := t.TempDir()
	q := "sqlite://" + filepath.Join(dir, "q.db") + "?queue=masked"
	ran := filepath.Join(dir, "ran")
	cmd := "printf %s \"$API_TOKEN\" > '" + ran + "'; exit 3"
	if code, _, stderr := run(t, q, "-q", "push", "-e", "API_TOKEN="+secret, "-e", "PLAIN=visible", "-c", cmd); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	id := onlyQueuedID(t, q)
	check := func(args []string, wantEnv bool) {
		t.Helper()
		for _, show := range []bool{false, true} {
			a := append([]string{q}, args...)
			if show {
				a = append(a, "--show-secrets")
			}
			code, stdout, stderr := run(t, a...)
			if code != 0 {
				t.Errorf("%v: exit %d: %s", a[1:], code, stderr)
				continue
			}
			// Tables show no environment: never the secret.
			if got, want := strings.Contains(stdout, secret), show && wantEnv; got != want {
				t.Errorf("%v: the secret printed: %v; want %v:\n%s", a[1:], got, want, stdout)
			}
			if !wantEnv {
				continue
			}
			for _, want := range []string{"API_TOKEN", "PLAIN", "visible"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("%v: %q missing:\n%s", a[1:], want, stdout)
				}
			}
			if got := strings.Contains(stdout, "****"); got == show {
				t.Errorf("%v: **** printed: %v; want %v:\n%s", a[1:], got, !show, stdout)
			}
		}
	}
	check([]string{"peek"}, false)
	check([]string{"peek", "--json"}, true)
	check([]string{"show", id}, true)
	check([]string{"show", id, "--json"}, true)
	if code, _, stderr := run(t, q, "-q", "worker"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(ran); err != nil || string(b) != secret {
		t.Fatalf("the task saw API_TOKEN=%q (%v); want the real value", b, err)
	}
	check([]string{"dlq", "list"}, false)
	check([]string{"dlq", "list", "--json"}, true)
	check([]string{"show", id}, true)
}

// TestPayloadTaskEnvMaskedWhenRejected: a kwargs line without "cmd" is a
// payload task, which the shell worker dead-letters. The secret values of
// its "env" are masked in the worker's log lines and in the reason it
// stores, which dlq list, results and show print.
func TestPayloadTaskEnvMaskedWhenRejected(t *testing.T) {
	t.Parallel()
	const secret = "tok-S3CRET"
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=payload"
	line := `{"env": {"API_TOKEN": "` + secret + `", "PLAIN": "visible"}}` + "\n"
	if code, _, stderr := runIn(t, line, q, "-q", "push", "--num-retries", "0"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	code, _, stderr := run(t, q, "worker")
	if code != 0 {
		t.Fatalf("worker: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "has no command") {
		t.Fatalf("worker: no rejection logged:\n%s", stderr)
	}
	outputs := map[string]string{"worker": stderr}
	code, stdout, stderr := run(t, q, "results", "--jsonl")
	if code != 0 {
		t.Fatalf("results: exit %d: %s", code, stderr)
	}
	outputs["results --jsonl"] = stdout
	var rec struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &rec); err != nil {
		t.Fatalf("results --jsonl: %v: %q", err, stdout)
	}
	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "list", "--json"}, {"show", rec.ID}, {"show", rec.ID, "--json"}} {
		code, stdout, stderr := run(t, append([]string{q}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		outputs[strings.Join(args, " ")] = stdout
	}
	for what, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("%s printed the secret:\n%s", what, out)
		}
	}
	if !strings.Contains(outputs["worker"], "API_TOKEN") || !strings.Contains(outputs["worker"], "visible") {
		t.Errorf("worker: the payload's variables are not shown:\n%s", outputs["worker"])
	}
}

// TestOpenersPrintNoCredential: an Azure opener printed by a program (%v,
// %+v, %s) says whether a connection string is set, never what it holds.
func TestOpenersPrintNoCredential(t *testing.T) {
	t.Parallel()
	const secret = "S3CRETkey"
	cs := "AccountName=a;AccountKey=" + secret + ";SharedAccessKey=" + secret
	for _, o := range []any{
		&azqueue.URLOpener{ConnectionString: cs},
		&servicebus.URLOpener{ConnectionString: cs},
		&azblob.URLOpener{ConnectionString: cs},
	} {
		for _, format := range []string{"%v", "%+v", "%s"} {
			got := fmt.Sprintf(format, o)
			if strings.Contains(got, secret) || !strings.Contains(got, "connection string set: true") {
				t.Errorf("Sprintf(%q, %T) = %q; want it to say a connection string is set, without it", format, o, got)
			}
		}
	}
}

// TestCommandCredentialsRedactedInText: a credential typed in a task's
// command, or printed in its output, reads xxxxx in the text of peek, show,
// dlq list (table and --detail) and result unless --show-secrets; --json
// prints the command and output as stored.
func TestCommandCredentialsRedactedInText(t *testing.T) {
	t.Parallel()
	const secret = "S3CRETpw"
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=redacted"
	cmd := "echo postgres://app:" + secret + "@db/jobs; exit 3 # psql postgres://app:" + secret + "@db"
	if code, _, stderr := run(t, q, "-q", "push", "--num-retries", "0", "-c", cmd); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	id := onlyQueuedID(t, q)
	check := func(args []string, wantSecret bool) {
		t.Helper()
		code, stdout, stderr := run(t, append([]string{q}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if got := strings.Contains(stdout, secret); got != wantSecret {
			t.Errorf("%v: the secret printed: %v; want %v:\n%s", args, got, wantSecret, stdout)
		}
		if !wantSecret && !strings.Contains(stdout, "app:xxxxx@db") {
			t.Errorf("%v: no redacted credential (app:xxxxx@db) printed:\n%s", args, stdout)
		}
	}
	for _, args := range [][]string{{"peek"}, {"show", id}} {
		check(args, false)
		check(append(args, "--show-secrets"), true)
	}
	check([]string{"peek", "--json"}, true)
	if code, _, stderr := run(t, q, "-q", "worker"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "list", "--detail"}, {"show", id}, {"result", id}} {
		check(args, false)
		check(append(args, "--show-secrets"), true)
	}
	check([]string{"result", id, "--json"}, true)
}

// onlyQueuedID is the task ID of the one task queued at q, from peek --json.
func onlyQueuedID(t *testing.T, q string) string {
	t.Helper()
	code, stdout, stderr := run(t, q, "peek", "--json")
	if code != 0 {
		t.Fatalf("peek --json: exit %d: %s", code, stderr)
	}
	var peeked []struct {
		Body struct {
			ID string `json:"id"`
		} `json:"body"`
	}
	if err := json.Unmarshal([]byte(stdout), &peeked); err != nil || len(peeked) != 1 {
		t.Fatalf("peek --json: %v, %q", err, stdout)
	}
	return peeked[0].Body.ID
}
