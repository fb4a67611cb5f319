package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// TestClaimSkipsCrowdedHead: when more tasks of a full key sit at the head
// of the queue than one scan window holds, a claim still finds the eligible
// task behind them (the function's second pass).
func TestClaimSkipsCrowdedHead(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	q, err := jobq.OpenWithOptions(ctx, newQueueURL(t), jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Admin().SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "busy", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	var tasks []*jobq.Task
	for i := range 50 {
		tasks = append(tasks, &jobq.Task{Command: fmt.Sprintf("busy %d", i), ConcurrencyKey: "busy"})
	}
	tasks = append(tasks, &jobq.Task{Command: "free"})
	if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	first, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
	if err != nil || first.Task.ConcurrencyKey != "busy" {
		t.Fatalf("first receive: %v, %v; want a busy task", first, err)
	}
	second, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("second receive: %v; want the free task behind 49 blocked ones", err)
	}
	if second.Task.Command != "free" {
		t.Fatalf("second receive gave %q; want the free task", second.Task.Command)
	}
	if _, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute}); err == nil {
		t.Fatal("a third receive returned a task; the busy key is at its cap and nothing else is queued")
	}
	for _, e := range []*jobq.Envelope{first, second} {
		if err := e.Complete(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHeldForgetsEndedLeases: a lease on a capped key is recorded in held
// when claimed, is no longer counted once settled, and is deleted by the
// next claim that meets its key, so held stays as small as the keys'
// in-flight leases.
func TestHeldForgetsEndedLeases(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openDriver(t)
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	msgs := []*driver.Message{{Body: []byte(`{"n": 1}`), ConcurrencyKey: "k"}, {Body: []byte(`{"n": 2}`), ConcurrencyKey: "k"}, {Body: []byte(`{"n": 3}`), ConcurrencyKey: "k"}}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	held := func() []string {
		t.Helper()
		rows, err := d.pool.Query(ctx, `SELECT lease::text FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.held WHERE queue = $1 AND key = 'k'`, d.cfg.queue)
		if err != nil {
			t.Fatal(err)
		}
		leases, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return leases
	}
	for round := 1; round <= 3; round++ {
		got, err := d.claim(ctx, 5, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("round %d: claimed %d messages of a key capped at 1; want 1", round, len(got))
		}
		if h := held(); len(h) != 1 || !strings.HasPrefix(got[0].Lease.Token, h[0]) {
			t.Fatalf("round %d: held has %q; want only the lease just taken (%s)", round, h, got[0].Lease.Token)
		}
		if errs := d.Complete(ctx, driver.Completions(got[0].Lease)); errs != nil {
			t.Fatalf("round %d: complete: %v", round, errs)
		}
	}
}

// TestCapCountsLeasesTakenBeforeIt: a cap set while its key's tasks run
// counts their leases, though they were taken without a cap to record them.
func TestCapCountsLeasesTakenBeforeIt(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openDriver(t)
	msgs := []*driver.Message{{Body: []byte(`{"n": 1}`), ConcurrencyKey: "k"}, {Body: []byte(`{"n": 2}`), ConcurrencyKey: "k"}}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	first, err := d.claim(ctx, 1, time.Minute)
	if err != nil || len(first) != 1 {
		t.Fatalf("claim before the cap: %d messages, %v; want 1", len(first), err)
	}
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if got, err := d.claim(ctx, 5, time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("claim under a cap of 1 with one lease in flight: %d messages, %v; want none", len(got), err)
	}
	if errs := d.Complete(ctx, driver.Completions(first[0].Lease)); errs != nil {
		t.Fatal(errs)
	}
	if got, err := d.claim(ctx, 5, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("claim after the lease ended: %d messages, %v; want 1", len(got), err)
	}
}
