package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var seq atomic.Int64

// baseURL is the server the tests use; JOBQ_TEST_POSTGRES_URL overrides the
// local default.
func baseURL() string {
	if s := os.Getenv("JOBQ_TEST_POSTGRES_URL"); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// queueURL returns the URL of a queue no other test uses, in the shared test
// schema jobq_test, with extra query parameters. The queue's messages and
// dead letters are deleted after the test.
func queueURL(t testing.TB, extra url.Values) string {
	t.Helper()
	u, err := url.Parse(baseURL())
	if err != nil {
		t.Fatalf("JOBQ_TEST_POSTGRES_URL: %v", err)
	}
	q := u.Query()
	name := fmt.Sprintf("t%d-%d", time.Now().UnixNano(), seq.Add(1))
	q.Set("queue", name)
	if !q.Has("schema") {
		q.Set("schema", "jobq_test")
	}
	schema := q.Get("schema")
	for k, v := range extra {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	t.Cleanup(func() { dropQueue(t, schema, name) })
	return u.String()
}

// connString is baseURL without jobq's own parameters, for the tests'
// direct connections.
func connString() string {
	u, err := url.Parse(baseURL())
	if err != nil {
		return baseURL()
	}
	q := u.Query()
	for _, k := range []string{"queue", "schema", "poll", "notify_interval", "max_message_bytes", "sync_push", "spin", "listen", "pgbouncer"} {
		q.Del(k)
	}
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

// dropQueue deletes what a test left in its queue.
func dropQueue(t testing.TB, schema, queue string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString())
	if err != nil {
		t.Logf("clean-up of queue %s: %v", queue, err)
		return
	}
	defer conn.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	for _, table := range []string{"messages", "dead_letters", "held_tasks"} {
		// The schema may not exist if the test failed before opening.
		conn.Exec(ctx, `DELETE FROM `+s+`.`+table+` WHERE queue = $1`, queue)
	}
}
