package cli_test

import (
	"strings"
	"testing"

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
	asReader, _ := engines.PostgresRole(t, u, "jobq_push_reader", `GRANT USAGE ON SCHEMA {schema} TO {role}; GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}`)
	code, _, errOut := run(t, asReader, "push", "-c", "echo refused")
	if code == 0 || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, "not stored") {
		t.Fatalf("push as a role that may only read: exit %d, %q; want a failure naming the refusal", code, errOut)
	}
	if strings.Contains(errOut, "could not be recorded") || strings.Contains(errOut, "Blob Storage") {
		t.Errorf("push refused by the queue itself logged a warning about the group's container: %q", errOut)
	}
}
