package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/tcpfault"
)

// TestPushWhosePolicyReadFailedWasNotSent drops the reply to the read of
// the queue's policies that comes before a push's insert: the insert was
// never sent, so the push, retried, must not report the task as resent
// after an attempt that may have stored it.
func TestPushWhosePolicyReadFailedWasNotSent(t *testing.T) {
	t.Parallel()
	p, proxied, _ := tcpfault.ForTest(t, "JOBQ_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", map[string]string{"schema": "jobq_test"})
	ctx := context.Background()
	q, err := jobq.Open(ctx, proxied)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = q.Admin().Clear(context.Background())
		q.Close()
	})
	// The first read of the policies is the push's, before its insert.
	p.Arm(tcpfault.Rule{Fault: tcpfault.DropReply, Match: func(b []byte) bool {
		return strings.Contains(string(b), ".policies WHERE queue")
	}})
	res, err := q.Push(ctx, &jobq.Task{Command: "echo once"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Fired() != 1 {
		t.Fatalf("%d replies dropped, want the policy read's", p.Fired())
	}
	if res.Resent {
		t.Errorf("push result %+v: Resent, though no attempt sent the task before the one that stored it", res)
	}
}
