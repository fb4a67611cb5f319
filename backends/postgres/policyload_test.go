package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// TestPolicyLoadFollowsCallerContext: the first settlements on a new
// handle load the queue's policies (the portable layer's cache of
// retention, retry backoff and results) within their callers' contexts.
// With the policies table locked, a Complete whose deadline passes gives
// up with it and leaves nothing cached; of two Completes sharing a load,
// the one that started it is cancelled and the load goes on for the other
// past the 5 s a load without a caller's deadline gets, until the lock
// goes; that other's record then has the queue's retention, not the
// default.
func TestPolicyLoadFollowsCallerContext(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	// A schema of its own: the lock below must stall no other test.
	schema := fmt.Sprintf("%s_pload_%d", testSchema, time.Now().UnixNano())
	url := newQueueURL(t, "schema="+schema)
	conn, err := pgx.Connect(ctx, testConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		conn.Close(context.Background())
	})
	quiet := jobq.Options{Logger: slog.New(slog.DiscardHandler)}
	admin, err := jobq.OpenWithOptions(ctx, url, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Admin().SetPolicy(ctx, driver.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PushBatch(ctx, []*jobq.Task{{Command: "a"}, {Command: "b"}, {Command: "c"}}, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	q, err := jobq.OpenWithOptions(ctx, url, quiet) // a new handle: nothing cached
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var es []*jobq.Envelope
	for range 3 {
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}

	conn2, err := pgx.Connect(ctx, testConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(context.Background())
	tx, err := conn2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { tx.Rollback(context.Background()) }) }
	defer release()
	if _, err := tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{schema, "policies"}.Sanitize()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// waiting reports whether a query of the schema has waited for the
	// lock for more than secs seconds.
	waiting := func(secs float64) bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND position($1 in query) > 0 AND extract(epoch FROM clock_timestamp() - query_start) > $2`, schema+`".policies`, secs).Scan(&n)
		return err == nil && n > 0
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s", what)
			}
		}
	}

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	began := time.Now()
	err = es[0].Complete(short)
	cancel()
	t.Logf("Complete with a 300ms deadline while the policies table is locked returned after %v", time.Since(began).Round(time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Complete whose deadline passed while the policies load = %v; want DeadlineExceeded", err)
	}
	waitFor("the load of the Complete that gave up to end with its deadline", func() bool { return !waiting(0) })

	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	firstErr, secondErr := make(chan error, 1), make(chan error, 1)
	go func() { firstErr <- es[1].Complete(first) }()
	waitFor("a Complete to start loading the policies", func() bool { return waiting(0) })
	go func() { secondErr <- es[2].Complete(ctx) }()
	cancelFirst()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Complete cancelled while the policies load = %v; want Canceled", err)
	}
	waitFor("the shared load to go on past 5 s for the Complete still waiting", func() bool { return waiting(5.5) })
	release()
	if err := <-secondErr; err != nil {
		t.Fatalf("Complete that waited for the policies: %v", err)
	}
	res, err := q.Result(ctx, es[2].Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(res.ExpiresAt); left > time.Hour {
		t.Fatalf("record expires in %v; want within the queue's retention (1h), not the default", left)
	}
}
