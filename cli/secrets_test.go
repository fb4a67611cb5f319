package cli_test

import (
	"strings"
	"testing"

	_ "github.com/jobq/jobq/backends/all"
	"github.com/jobq/jobq/cli"
)

// TestSecretsNeverPrinted: whatever the command line, no password, key or
// signature from it reaches the output. Each of these printed the secret
// before every message went through jobq.Redact.
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
