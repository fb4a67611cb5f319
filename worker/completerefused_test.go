package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/worker"
)

// TestCompletionRefusedStopsTheWorker: a worker whose credentials may
// claim but not complete (here a Postgres role whose DELETE on the
// queue's table is taken away after it opened the queue: one lacking it
// is refused at open) stops at the first refused completion, returning
// the PermissionDenied error. It went on taking tasks, each of which ran
// and then could not be completed, so it ran again after every lease,
// without end.
func TestCompletionRefusedStopsTheWorker(t *testing.T) {
	t.Parallel()
	u := engines.URLs(t, "completerefused")["postgres"]
	q := engines.Open(t, u) // creates the schema as the test's role
	pushOne(t, q, &jobq.Task{Command: "refused " + time.Now().Format("150405.000000")})

	ctx := t.Context()
	roleURL, asAdmin := engines.PostgresRole(t, u, "jobq_no_delete", `GRANT USAGE ON SCHEMA {schema} TO {role};
		GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}`)
	asRole, err := jobq.Open(ctx, roleURL)
	if err != nil {
		t.Fatal(err)
	}
	defer asRole.Close()
	asAdmin(`REVOKE DELETE ON {schema}.messages FROM {role}`)
	var ran atomic.Int32
	w := worker.New(asRole, worker.HandlerFunc(func(context.Context, *worker.Job) error {
		ran.Add(1)
		return nil
	}), worker.Options{Logger: quietLog(), Visibility: time.Minute})
	err = w.Run(ctx)
	if errcode.Of(err) != errcode.PermissionDenied {
		t.Fatalf("worker whose completions are refused: Run = %v (code %v); want the PermissionDenied error", err, errcode.Of(err))
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the task ran %d times; want 1", n)
	}
}
