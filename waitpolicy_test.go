package jobq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestWaitPolicyTurnsNone: a wait that began while the queue kept records
// fails with FailedPrecondition, naming the policy, once the results policy
// is set to none: the tasks it waits for would end without a record, so it
// could never return. It used to wait for good.
func TestWaitPolicyTurnsNone(t *testing.T) {
	t.Parallel()
	suffix := time.Now().Format("150405.000000")
	for name, u := range engines.URLs(t, "waitnone") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q := engines.Open(t, u)
			tasks := []*jobq.Task{{Command: "echo first " + suffix}, {Command: "echo second " + suffix}}
			res, err := q.PushBatch(t.Context(), tasks, jobq.PushOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A guard against a hang, not a timing assertion.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			reported := make(chan string, 2)
			waited := make(chan error, 1)
			go func() {
				waited <- q.WaitFunc(ctx, []string{res[0].ID, res[1].ID}, jobq.WaitOptions{}, func(r *jobq.Result) error {
					reported <- r.ID
					return nil
				})
			}()
			complete := func() {
				t.Helper()
				e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Wait: 5 * time.Second})
				if err != nil || e == nil {
					t.Fatalf("receive: %v, %v", e, err)
				}
				if err := e.Complete(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			// One ends under all: the wait reports it, so it is waiting.
			complete()
			<-reported
			p, err := hooks.ParsePolicy("results", "none")
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Admin().SetPolicy(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			complete()
			err = <-waited
			if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), "policy set results all") {
				t.Fatalf("Wait after the policy became none = %v (%s); want FailedPrecondition naming the policy", err, errcode.Of(err))
			}
		})
	}
}
