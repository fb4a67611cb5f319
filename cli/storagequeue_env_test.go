package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestStorageQueueEnv: ai4s-jobq takes its queue from $JOBQ_STORAGE_QUEUE
// when none is given; jobq does too, after $JOBQ_QUEUE. (Not parallel: it
// sets the environment.)
func TestStorageQueueEnv(t *testing.T) {
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=envq"
	other := "sqlite://" + filepath.Join(t.TempDir(), "other.db") + "?queue=envq"
	cases := []struct {
		name          string
		jobqQueue     string
		storageQueue  string
		wantCode      int
		wantInOutput  string
		wantQueueSize string
		connStr       string
	}{
		{"storage queue alone", "", q, 0, "", "1", ""},
		{"JOBQ_QUEUE wins", other, q, 0, "", "1", ""}, // still the first case's one
		// ai4s-jobq's ACCOUNT/QUEUE spec is an Azure Storage queue: with a
		// malformed account key it fails before any request is made.
		{"ai4s-jobq spec", "", "myaccount/myqueue", cli.ExitUsage, "AccountKey", "",
			"DefaultEndpointsProtocol=http;AccountName=myaccount;AccountKey=not*base64;QueueEndpoint=http://127.0.0.1:1/myaccount"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("JOBQ_QUEUE", c.jobqQueue)
			t.Setenv("JOBQ_STORAGE_QUEUE", c.storageQueue)
			t.Setenv("JOBQ_CONNECTION_STRING", c.connStr)
			code, out, errOut := run(t, "push", "-c", "echo "+c.name)
			if code != c.wantCode || !strings.Contains(out+errOut, c.wantInOutput) {
				t.Fatalf("push: exit %d, %q %q; want exit %d with %q", code, out, errOut, c.wantCode, c.wantInOutput)
			}
			if c.wantQueueSize == "" {
				return
			}
			if code, out, errOut := run(t, q, "size"); code != 0 || strings.TrimSpace(out) != c.wantQueueSize {
				t.Errorf("size of the $JOBQ_STORAGE_QUEUE queue: exit %d, %q %q; want %s", code, out, errOut, c.wantQueueSize)
			}
		})
	}
}
