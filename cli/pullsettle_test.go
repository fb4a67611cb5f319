package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/tools/testkit/tcpfault"
)

// TestPullWhoseCompletionWasUnanswered pulls a task through a proxy that
// drops the reply to its completion (which is applied): pull must not
// say the queue was empty and exit 0, but say the completion's outcome is
// unknown, and exit 1.
func TestPullWhoseCompletionWasUnanswered(t *testing.T) {
	t.Parallel()
	p, proxied, directURL := tcpfault.ForTest(t, "JOBQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0", map[string]string{"prefix": "jobqtest"})
	ctx := context.Background()
	direct, err := jobq.Open(ctx, directURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = direct.Admin().Clear(context.Background())
		direct.Close()
	})
	engines.WarmUp(t, direct)
	res, err := direct.Push(ctx, &jobq.Task{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	// The completion is the script that names the task with its result,
	// after the task ran: the first after the claim.
	p.Arm(tcpfault.Rule{Fault: tcpfault.DropReply, Times: 1, Match: func(b []byte) bool {
		return strings.Contains(string(b), "evalsha") && strings.Contains(string(b), res.ID) && strings.Contains(string(b), "succeeded")
	}})
	var out, errOut bytes.Buffer
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	code := cli.Run(rctx, []string{proxied, "pull"}, strings.NewReader(""), &out, &errOut)
	stderr := errOut.String()
	t.Logf("exit %d; stderr:\n%s", code, stderr)
	if p.Fired() != 1 {
		t.Fatalf("%d replies dropped, want the completion's; stderr:\n%s", p.Fired(), stderr)
	}
	if n, err := direct.Admin().Size(ctx); err != nil || n != 0 {
		t.Fatalf("queue size %d (%v): the completion should have been applied", n, err)
	}
	if code != cli.ExitFailure || strings.Contains(stderr, "nothing to pull") || !strings.Contains(stderr, "is unknown") {
		t.Errorf("exit %d, want %d, with a message that the completion's outcome is unknown; stderr:\n%s", code, cli.ExitFailure, stderr)
	}
}
