package worker_test

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/worker"
)

// TestCompletionRefusedStopsTheWorker: a worker whose credentials may
// claim but not complete (here a Postgres role without DELETE on the
// queue's table) stops at the first refused completion, returning the
// PermissionDenied error. It went on taking tasks, each of which ran and
// then could not be completed, so it ran again after every lease, without
// end.
func TestCompletionRefusedStopsTheWorker(t *testing.T) {
	t.Parallel()
	u := engines.URLs(t, "completerefused")["postgres"]
	q := engines.Open(t, u) // creates the schema as the test's role
	pushOne(t, q, &jobq.Task{Command: "refused " + time.Now().Format("150405.000000")})

	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	v := parsed.Query()
	schema := v.Get("schema")
	if schema == "" {
		schema = "jobq"
	}
	v.Del("schema")
	v.Del("queue")
	admin := *parsed
	admin.RawQuery = v.Encode()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		t.Skipf("no Postgres server: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) }) // after the role's cleanup below
	role := fmt.Sprintf("jobq_no_delete_%d", time.Now().UnixNano())
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, `CREATE ROLE `+role+` NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `DROP OWNED BY `+role+`; DROP ROLE `+role); err != nil {
			t.Errorf("dropping role %s: %v", role, err)
		}
	})
	if _, err := conn.Exec(ctx, `GRANT USAGE ON SCHEMA `+s+` TO `+role+`;
		GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA `+s+` TO `+role+`;
		REVOKE DELETE ON `+s+`.messages FROM `+role); err != nil {
		t.Fatal(err)
	}

	asRole, err := jobq.Open(ctx, u+"&options="+url.QueryEscape("-c role="+role))
	if err != nil {
		t.Fatal(err)
	}
	defer asRole.Close()
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
