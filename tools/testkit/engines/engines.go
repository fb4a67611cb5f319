// Package engines opens queues on the engines that tests of the portable
// layer run against: SQLite (a file of the test's own), and the Postgres
// and Redis servers the conformance suites use ($JOBQ_TEST_POSTGRES_URL
// and $JOBQ_TEST_REDIS_URL, by default the local servers).
package engines

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/postgres" // the postgres:// scheme
	_ "github.com/jobq/jobq/backends/redis"    // the redis:// scheme
	_ "github.com/jobq/jobq/backends/sqlite"   // the sqlite:// scheme
	"github.com/jobq/jobq/driver"
)

// URLs returns, by engine name, the URL of a queue named name with a
// suffix of its own, so that runs and tests do not share one.
func URLs(t *testing.T, name string) map[string]string {
	t.Helper()
	name += "-" + time.Now().Format("150405.000000")
	return map[string]string{
		"sqlite":   "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=" + url.QueryEscape(name),
		"postgres": withQueue(t, server("JOBQ_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test"), name),
		"redis":    withQueue(t, server("JOBQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), name),
	}
}

// Open opens the queue at u. When the test ends it clears the queue, lifts
// its results policy (tests set it) and closes it.
func Open(t *testing.T, u string) *jobq.Queue {
	t.Helper()
	q, err := jobq.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = q.Admin().UnsetPolicy(ctx, driver.ResultsPolicy, "")
		_, _ = q.Admin().Clear(ctx)
		_ = q.Close()
	})
	return q
}

// server is the URL in the environment variable env, else def.
func server(env, def string) string {
	if s := os.Getenv(env); s != "" {
		return s
	}
	return def
}

// withQueue sets the queue= parameter of server URL s.
func withQueue(t *testing.T, s, name string) string {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("test server URL: %v", err)
	}
	v := u.Query()
	v.Set("queue", name)
	u.RawQuery = v.Encode()
	return u.String()
}

// WarmUp pushes, claims and completes one task on q, so that the engine
// holds the statements or scripts of that cycle before a test drops or
// stalls a reply: Redis runs a script it has not seen yet only after
// refusing it once (NOSCRIPT), and a test that drops the first reply of a
// cold server would drop that refusal instead of the write it means.
func WarmUp(t *testing.T, q *jobq.Queue) {
	t.Helper()
	ctx := t.Context()
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo warm-up"}); err != nil {
		t.Fatal(err)
	}
	env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Complete(ctx); err != nil {
		t.Fatal(err)
	}
}

// PostgresRole makes a role of its own for the test, with the rights
// grants gives it (statements in which {role} and {schema} stand for the
// role's and the queue's schema's quoted names), and returns queue URL u
// opened as that role (SET ROLE through the URL's options), and a function
// that runs more such statements as u's own role (to take a right away
// from a queue opened as the role, say). The role is dropped when the test
// ends. The test is skipped without a Postgres server.
func PostgresRole(t *testing.T, u, name, grants string) (roleURL string, asAdmin func(sql string)) {
	t.Helper()
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
	role := fmt.Sprintf("%s_%d", name, time.Now().UnixNano())
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
	names := strings.NewReplacer("{role}", role, "{schema}", pgx.Identifier{schema}.Sanitize())
	asAdmin = func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, names.Replace(sql)); err != nil {
			t.Fatal(err)
		}
	}
	asAdmin(grants)
	return u + "&options=" + url.QueryEscape("-c role="+role), asAdmin
}
