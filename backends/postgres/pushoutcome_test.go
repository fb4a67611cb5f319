package postgres_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/tcpfault"
)

// TestPushWhosePolicyReadFailedWasNotSent drops the reply to the read of
// the queue's policies that comes before a push's insert: the insert was
// never sent, so the push, retried, must not report the task as resent
// after an attempt that may have stored it.
func TestPushWhosePolicyReadFailedWasNotSent(t *testing.T) {
	t.Parallel()
	base := os.Getenv("JOBQ_TEST_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err != nil {
		t.Skipf("needs Postgres at %s", u.Host)
	} else {
		c.Close()
	}
	p, err := tcpfault.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	v := u.Query()
	v.Set("queue", fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()))
	if !v.Has("schema") {
		v.Set("schema", "jobq_test")
	}
	u.RawQuery = v.Encode()
	u.Host = p.Addr()
	ctx := context.Background()
	q, err := jobq.Open(ctx, u.String())
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
