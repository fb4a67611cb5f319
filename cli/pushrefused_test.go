package cli_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestPushRefusedByTheQueueSaysNothingOfGroups: a push whose credentials
// the queue itself refuses (here a Postgres role that may only read the
// tables) fails, naming the refusal, without the warning about a group
// the result container refused (that one is for Azure credentials with
// queue rights only, and told the user to grant Blob Storage rights).
// The warning was logged before the push went again without its group,
// whatever the backend.
func TestPushRefusedByTheQueueSaysNothingOfGroups(t *testing.T) {
	t.Parallel()
	u := engines.URLs(t, "pushrefused")["postgres"]
	q := engines.Open(t, u) // creates the schema as the test's role
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
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
	role := fmt.Sprintf("jobq_push_reader_%d", time.Now().UnixNano())
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
	if _, err := conn.Exec(ctx, `GRANT USAGE ON SCHEMA `+s+` TO `+role+`; GRANT SELECT ON ALL TABLES IN SCHEMA `+s+` TO `+role); err != nil {
		t.Fatal(err)
	}

	asReader := u + "&options=" + url.QueryEscape("-c role="+role)
	code, _, errOut := run(t, asReader, "push", "-c", "echo refused")
	if code == 0 || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, "not stored") {
		t.Fatalf("push as a role that may only read: exit %d, %q; want a failure naming the refusal", code, errOut)
	}
	if strings.Contains(errOut, "could not be recorded") || strings.Contains(errOut, "Blob Storage") {
		t.Errorf("push refused by the queue itself logged a warning about the group's container: %q", errOut)
	}
}
