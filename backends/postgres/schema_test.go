package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestMigrateConcurrently starts many workers on a fresh schema at once:
// every one must succeed and each step must be applied exactly once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)

	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			d := openDriver(t, "schema="+schema)
			if _, err := d.Stats(ctx); err != nil {
				t.Errorf("stats on a freshly migrated schema: %v", err)
			}
		})
	}
	wg.Wait()

	var versions, max int
	err := pool.QueryRow(ctx, `SELECT count(*), max(version) FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations`).Scan(&versions, &max)
	if err != nil {
		t.Fatal(err)
	}
	if versions != len(migrations) || max != SchemaVersion {
		t.Fatalf("schema_migrations has %d rows up to version %d; want %d up to %d", versions, max, len(migrations), SchemaVersion)
	}
	// Migrating again is a no-op.
	if err := migrate(ctx, pool, schema); err != nil {
		t.Fatalf("second migration: %v", err)
	}
}

// freshSchema returns the name of a schema no test has created yet, dropped
// after the test, and a pool for the test's own queries.
func freshSchema(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	schema := fmt.Sprintf("jobq_fresh_%d_%d", time.Now().UnixNano(), queueSeq.Add(1))
	pool, err := pgxpool.New(ctxT(t), testConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	return schema, pool
}

// TestClaimsAreHOTUpdates: a claim changes visible_at, lease and
// deliveries, which no index on messages may cover, so that every claim is
// a HOT update (no new index entries, no dead ones for later claims to
// step over). Schema step 4 had an index on visible_at and lease that made
// every claim non-HOT, and before step 6 the pages lacked room for half the
// new versions of a claim of a page's rows; this catches either again. Each
// case migrates a schema of its own from scratch, and runs its claim in a
// transaction that reads its own counters.
func TestClaimsAreHOTUpdates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		policies bool
	}{{"plain claim", false}, {"claim under policies", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t) // the subtest's own: it may start long after its parent
			schema, _ := freshSchema(t)
			d := openDriver(t, "schema="+schema)
			// A page's worth of messages of a typical size, claimed in one
			// statement as a worker does, and one on a key.
			body := `{"version": 1, "reply_requested": false, "kwargs": "{\"n\": %d}", "num_retries": 0, "id": "%032d"}`
			msgs := []*driver.Message{{Body: fmt.Appendf(nil, body, 0, 0), ConcurrencyKey: "k"}}
			for i := 1; i <= 60; i++ {
				msgs = append(msgs, &driver.Message{Body: fmt.Appendf(nil, body, i, i)})
			}
			if _, err := d.Push(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			if tc.policies {
				if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 5}); err != nil {
					t.Fatal(err)
				}
			}
			claimSQL, err := d.claimSQL(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := d.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			rows, err := tx.Query(ctx, claimSQL, d.cfg.queue, 100, int64(time.Minute/time.Microsecond))
			if err != nil {
				t.Fatal(err)
			}
			claimed := 0
			for rows.Next() {
				claimed++
			}
			if rows.Close(); rows.Err() != nil {
				t.Fatal(rows.Err())
			}
			var updated, hot int64
			err = tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated(c.oid), pg_stat_get_xact_tuples_hot_updated(c.oid)
				FROM pg_class c WHERE c.oid = ($1 || '.messages')::regclass`, pgx.Identifier{d.cfg.schema}.Sanitize()).Scan(&updated, &hot)
			if err != nil {
				t.Fatal(err)
			}
			// An index on a claimed column makes none HOT; pages packed at 70 %
			// about half. At 50 % a page still lacks room for the last new
			// version or so of the rows it holds (a leased version is larger).
			if claimed != len(msgs) || updated != int64(len(msgs)) || hot*100 < updated*85 {
				t.Fatalf("claimed %d messages: %d updates, %d of them HOT; want %d, at least 85 %% HOT (an index covers a column the claim changes, or pages lack room)",
					claimed, updated, hot, len(msgs))
			}
		})
	}
}

// TestNewerSchemaNeedingANewerReleaseIsRefused: a schema that a later
// release migrated past this code's steps opens when the newer steps are
// additive, and is refused, for writing and for reading, with a message
// naming the steps, when one of them needs a release newer than this one.
func TestNewerSchemaNeedingANewerReleaseIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		minRelease int
		refused    bool
	}{
		{"additive newer step", 0, false},
		{"newer step that older releases may not run beside", SchemaVersion + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			schema, pool := freshSchema(t)
			later := append(slices.Clone(migrations), migration{SchemaVersion + 1, "a later release's step", `SELECT 1`, tc.minRelease})
			if err := migrateSteps(ctx, pool, schema, later); err != nil {
				t.Fatal(err)
			}
			for _, readOnly := range []bool{false, true} {
				d, err := New(ctx, pool, Options{Schema: schema, Queue: "q", ReadOnly: readOnly})
				if !tc.refused {
					if err != nil {
						t.Fatalf("open (read-only %v): %v; want it opened", readOnly, err)
					}
					d.Close()
					continue
				}
				if err == nil {
					d.Close()
					t.Fatalf("open (read-only %v) succeeded; want it refused", readOnly)
				}
				want := fmt.Sprintf("jobq schema step %d, written by a newer jobq whose step %d needs a release that knows step %d; this program knows steps up to %d: upgrade it", SchemaVersion+1, SchemaVersion+1, SchemaVersion+1, SchemaVersion)
				if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), want) {
					t.Fatalf("open (read-only %v): %v (code %v); want FailedPrecondition saying %q", readOnly, err, errcode.Of(err), want)
				}
			}
		})
	}
}

// TestReadsOfAnOlderSchemaSayHowToUpgradeIt: a read-only open migrates
// nothing, so a read needing a newer step's columns on a schema an older
// release made fails FailedPrecondition saying that a push or worker of
// this release upgrades it, not with the server's bare undefined-column
// error.
func TestReadsOfAnOlderSchemaSayHowToUpgradeIt(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	// Step 10 is the last before task keys and packed bodies (step 11).
	if err := migrateSteps(ctx, pool, schema, migrations[:10]); err != nil {
		t.Fatal(err)
	}
	d, err := New(ctx, pool, Options{Schema: schema, Queue: "q", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		name string
		read func() error
	}{
		{"peek", func() error { _, err := d.Peek(ctx, 10); return err }},
		{"dead letters", func() error { _, err := d.ListDead(ctx, 10); return err }},
	} {
		err := tc.read()
		const want = "if an older jobq made it, run a push or worker of this jobq once to upgrade it"
		if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), want) {
			t.Errorf("%s of a step-10 schema: %v (code %v); want FailedPrecondition saying %q", tc.name, err, errcode.Of(err), want)
		}
	}
}
