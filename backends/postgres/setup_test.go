package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// testBaseURL is the server the tests use; JOBQ_TEST_POSTGRES_URL overrides
// the local default.
func testBaseURL() string {
	if s := os.Getenv("JOBQ_TEST_POSTGRES_URL"); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// testConnString is testBaseURL without jobq's own parameters, for the
// tests' direct connections.
func testConnString() string {
	u, err := url.Parse(testBaseURL())
	if err != nil {
		return testBaseURL()
	}
	cfg, err := parseURL(u)
	if err != nil {
		return testBaseURL()
	}
	return cfg.connString
}

// testSchema holds the tests' queues, apart from a user's own "jobq"
// schema: JOBQ_TEST_POSTGRES_URL's schema= when it has one.
var testSchema = func() string {
	if u, err := url.Parse(testBaseURL()); err == nil && u.Query().Has("schema") {
		return u.Query().Get("schema")
	}
	return "jobq_test"
}()

var queueSeq atomic.Int64

// newQueueURL returns the URL of a queue no other test uses, with extra
// query parameters appended. The queue's rows are deleted after the test.
func newQueueURL(t testing.TB, extra ...string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano(), queueSeq.Add(1))
	u, err := url.Parse(testBaseURL())
	if err != nil {
		t.Fatalf("JOBQ_TEST_POSTGRES_URL: %v", err)
	}
	q := u.Query()
	q.Set("queue", name)
	if !q.Has("schema") {
		q.Set("schema", testSchema)
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// openDriver opens a fresh queue with the driver directly and closes it
// after the test, deleting its messages, dead letters and result records.
func openDriver(t testing.TB, extra ...string) *Driver {
	t.Helper()
	return openURL(t, newQueueURL(t, extra...))
}

// openRaw opens raw with the driver directly.
func openRaw(raw string) (*Driver, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := Opener{}.Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	return drv.(*Driver), nil
}

func openURL(t testing.TB, raw string) *Driver {
	t.Helper()
	d, err := openRaw(raw)
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if !d.closing.Closed() {
			d.Clear(ctx)
			d.PurgeDead(ctx, nil)
			d.pool.Exec(ctx, `DELETE FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.results WHERE queue = $1`, d.cfg.queue)
			d.Close()
		}
	})
	return d
}

// msg makes a message with the given task id and body.
func msg(id string) *driver.Message {
	return &driver.Message{ID: id, Body: []byte(`{"id": "` + id + `"}`)}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
