package cli_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
)

// TestWorkerPreempted: with --preemption azure pointed at a metadata server
// that announces this VM's eviction, the worker exits with ExitPreempted
// and the task it was running is back in the queue.
func TestWorkerPreempted(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metadata/instance/compute/name":
			io.WriteString(w, "spot-1")
		case "/metadata/scheduledevents":
			if r.Method == http.MethodGet {
				io.WriteString(w, `{"DocumentIncarnation": 3, "Events": [{"EventId": "X", "EventType": "Preempt", "EventStatus": "Scheduled",
					"Resources": ["spot-1"], "NotBefore": "`+time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)+`"}]}`)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	q := sqliteQueue(t)
	if code, _, stderr := run(t, q, "push", "-c", "sleep 300"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	code, _, stderr := run(t, q, "worker", "--preemption", "azure", "--metadata-endpoint", srv.URL, "--wait")
	if code != cli.ExitPreempted || !strings.Contains(stderr, "preempted") {
		t.Fatalf("worker: exit %d, stderr %q; want exit %d saying preempted", code, stderr, cli.ExitPreempted)
	}
	qq, err := jobq.Open(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer qq.Close()
	st, err := qq.Admin().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready != 1 {
		t.Fatalf("after the eviction the queue has %+v; want the task ready again", st)
	}
}

func TestWorkerPreemptionFlags(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--preemption", "aws"}, `--preemption "aws": use auto, azure, gcp or off`},
		{[]string{"--preemption", "azure", "--metadata-endpoint", "169.254.169.254"}, "--metadata-endpoint"},
		{[]string{"--metadata-endpoint", "http://127.0.0.1:1/metadata"}, "base URL"},
	}
	for _, tt := range tests {
		code, _, stderr := run(t, append([]string{q, "worker"}, tt.args...)...)
		if code != cli.ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("worker %v: exit %d, stderr %q; want exit %d naming %q", tt.args, code, stderr, cli.ExitUsage, tt.want)
		}
	}
}

// TestMetadataEndpointFromEnv: $JOBQ_METADATA_ENDPOINT is checked as the
// flag is, and an invalid one is a usage error naming the variable.
func TestMetadataEndpointFromEnv(t *testing.T) {
	// Not parallel: it sets the environment.
	t.Setenv("JOBQ_METADATA_ENDPOINT", "metadata.local")
	code, _, stderr := run(t, sqliteQueue(t), "worker", "--preemption", "azure")
	if code != cli.ExitUsage || !strings.Contains(stderr, "$JOBQ_METADATA_ENDPOINT") {
		t.Fatalf("exit %d, stderr %q; want exit %d naming $JOBQ_METADATA_ENDPOINT", code, stderr, cli.ExitUsage)
	}
}
