package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
)

// TestTaskEnvWithholdsWorkerSecrets: the worker's own settings and the
// credentials of the services it uses do not reach a task unless PassEnv
// names them; ordinary variables do. Before TaskEnv every task inherited
// JOBQ_CONNECTION_STRING, AZURE_STORAGE_CONNECTION_STRING, JOBQ_QUEUE (with
// its password) and PGPASSWORD.
func TestTaskEnvWithholdsWorkerSecrets(t *testing.T) {
	t.Parallel()
	base := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/u", "LANG=C.UTF-8", "CUDA_VISIBLE_DEVICES=0", "MY_SETTING=1",
		"JOBQ_CONNECTION_STRING=AccountName=a;AccountKey=K", "JOBQ_QUEUE=postgres://u:PW@h/db",
		"AZURE_STORAGE_CONNECTION_STRING=AccountKey=K", "AZURE_CLIENT_SECRET=S", "PGPASSWORD=PW",
		"REDISCLI_AUTH=PW", "AWS_SECRET_ACCESS_KEY=S", "AWS_REGION=eu", "GOOGLE_APPLICATION_CREDENTIALS=/k.json",
		"MSI_SECRET=S", "PGHOST=db",
	}
	tests := []struct {
		name       string
		pass       []string
		want, gone []string // variable names
	}{
		{name: "default", want: []string{"PATH", "HOME", "LANG", "CUDA_VISIBLE_DEVICES", "MY_SETTING"},
			gone: []string{"JOBQ_CONNECTION_STRING", "JOBQ_QUEUE", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_CLIENT_SECRET",
				"PGPASSWORD", "PGHOST", "REDISCLI_AUTH", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "GOOGLE_APPLICATION_CREDENTIALS", "MSI_SECRET"}},
		{name: "passed by name and prefix", pass: []string{"PGHOST", "AWS_*"},
			want: []string{"PATH", "PGHOST", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"},
			gone: []string{"PGPASSWORD", "JOBQ_QUEUE", "AZURE_CLIENT_SECRET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var script strings.Builder
			for _, n := range tt.want {
				script.WriteString(`[ -n "${` + n + `+x}" ] || { echo missing ` + n + `; exit 1; }; `)
			}
			for _, n := range tt.gone {
				script.WriteString(`[ -z "${` + n + `+x}" ] || { echo leaked ` + n + `; exit 1; }; `)
			}
			// The worker's ids are set, and the queue name carries no URL.
			script.WriteString(`[ "$JOBQ_TASK_ID" = tid ] && [ "$JOBQ_QUEUE_NAME" = qn ] || { echo no ids; exit 1; }`)
			sh := &worker.Shell{Env: base, PassEnv: tt.pass}
			job := &worker.Job{Task: &jobq.Task{ID: "tid", Command: script.String()}, Log: quietLog(), QueueName: "qn"}
			if err := sh.Handle(context.Background(), job); err != nil {
				t.Fatalf("task: %v", err)
			}
		})
	}
}

// TestGateEnvWithholdsWorkerSecrets: gate commands come from the queue too
// and get the same environment rules.
func TestGateEnvWithholdsWorkerSecrets(t *testing.T) {
	t.Setenv("JOBQ_CONNECTION_STRING", "AccountKey=K")
	t.Setenv("PGPASSWORD", "PW")
	for _, tt := range []struct {
		pass []string
		gate string
	}{
		{nil, `[ -z "${JOBQ_CONNECTION_STRING+x}" ] && [ -z "${PGPASSWORD+x}" ] && [ -n "$PATH" ]`},
		{[]string{"PGPASSWORD"}, `[ "$PGPASSWORD" = PW ] && [ -z "${JOBQ_CONNECTION_STRING+x}" ]`},
	} {
		if err := worker.RunGate(context.Background(), tt.gate, tt.pass); err != nil {
			t.Errorf("gate %q with PassEnv %v: %v", tt.gate, tt.pass, err)
		}
	}
}

func TestCheckPassEnv(t *testing.T) {
	t.Parallel()
	if err := worker.CheckPassEnv([]string{"PGPASSWORD", "AWS_*"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "*", "A=B", "A*B*"} {
		if err := worker.CheckPassEnv([]string{bad}); err == nil {
			t.Errorf("CheckPassEnv(%q) accepted it", bad)
		}
	}
}
