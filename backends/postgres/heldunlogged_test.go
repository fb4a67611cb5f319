package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// heldMarked reports whether d's schema's held table has its mark.
func heldMarked(t *testing.T, d *Driver) bool {
	t.Helper()
	var ok bool
	if err := d.pool.QueryRow(ctxT(t), `SELECT EXISTS (SELECT FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.held h WHERE `+heldMark+`)`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestHeldIsUnlogged: held skips the write-ahead log, and a new schema
// has its mark.
func TestHeldIsUnlogged(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	var persistence string
	if err := d.pool.QueryRow(ctxT(t), `SELECT relpersistence::text FROM pg_class WHERE oid = $1::regclass`,
		pgx.Identifier{d.cfg.schema, "held"}.Sanitize()).Scan(&persistence); err != nil {
		t.Fatal(err)
	}
	if persistence != "u" {
		t.Errorf("held's relpersistence = %q; want u (unlogged)", persistence)
	}
	if !heldMarked(t, d) {
		t.Error("held has no mark")
	}
}

// TestHeldRebuiltWhenEmptied: held emptied under leases in flight, as a
// crash empties it, is rebuilt by the next claim under policies before it
// counts: the key at its cap stays there, in-flight leases keep their
// rows, and a settled lease frees its slot as before. Expired leases are
// not rebuilt.
func TestHeldRebuiltWhenEmptied(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t) // TRUNCATE must not reach other tests' rows
	d := openURL(t, newQueueURL(t, "schema="+schema))
	setCap(t, d, "k", 2)
	setCap(t, d, "short", 1)
	pushKeyed(t, d, "k", 5)
	taken := receive(t, d, 10, time.Minute)
	if len(taken) != 2 {
		t.Fatalf("claimed %d; want 2 of k", len(taken))
	}
	pushKeyed(t, d, "short", 2)
	if got := receive(t, d, 10, 100*time.Millisecond); len(got) != 1 {
		t.Fatalf("claimed %d; want 1 of short", len(got))
	}
	time.Sleep(200 * time.Millisecond) // short's lease expires

	if _, err := pool.Exec(ctx, `TRUNCATE `+pgx.Identifier{schema, "held"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, d, 10, time.Minute); len(got) != 1 || !strings.HasPrefix(got[0].ID, "short-") {
		t.Fatalf("claim after held was emptied: %v; want one task of short (k is at its cap, short's lease expired)", ids(got))
	}
	if !heldMarked(t, d) {
		t.Error("held has no mark after the claim")
	}
	if n := heldRowsOf(t, d, "k"); n != 2 {
		t.Errorf("held rows of k = %d; want its 2 leases in flight", n)
	}
	if errs := d.Complete(ctx, driver.Completions(taken[0].Lease)); errs != nil {
		t.Fatal(errs)
	}
	if got := receive(t, d, 10, time.Minute); len(got) != 1 {
		t.Fatalf("claim after one of k's leases was completed: %d messages; want 1", len(got))
	}
}

// TestHeldUpgrade: a schema at step 28 with leases in flight on a capped
// key moves to step 29 with its held rows, so the key stays at its cap.
// Where held is in a publication, which Postgres refuses to make unlogged,
// the step leaves it logged and claims work as before.
func TestHeldUpgrade(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name            string
		published       bool
		wantPersistence string
	}{
		{"unlogged", false, "u"},
		{"in a publication, stays logged", true, "p"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			schema, pool := freshSchema(t)
			s := pgx.Identifier{schema}.Sanitize()
			if err := migrateSteps(ctx, pool, schema, migrations[:28]); err != nil {
				t.Fatal(err)
			}
			if tt.published {
				pub := pgx.Identifier{schema + "_pub"}.Sanitize()
				if _, err := pool.Exec(ctx, `CREATE PUBLICATION `+pub+` FOR TABLE `+s+`.held`); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { pool.Exec(context.Background(), `DROP PUBLICATION `+pub) })
			}
			const queue = "up"
			if _, err := pool.Exec(ctx, `INSERT INTO `+s+`.policies (queue, kind, key, limit_n) VALUES ($1, 'concurrency', 'k', 2)`, queue); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `INSERT INTO `+s+`.messages (queue, packed_body, concurrency_key) SELECT $1, 'a'::bytea || convert_to('{"n": ' || i || '}', 'UTF8'), 'k' FROM generate_series(1, 4) i`, queue); err != nil {
				t.Fatal(err)
			}
			var taken int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`.claim_lookup($1, 5, 60000000)`, queue).Scan(&taken); err != nil || taken != 2 {
				t.Fatalf("claim of step 28 under a cap of 2: %d leases, %v; want 2", taken, err)
			}

			d := openDriver(t, "schema="+schema, "queue="+queue)
			var persistence string
			if err := pool.QueryRow(ctx, `SELECT relpersistence::text FROM pg_class WHERE oid = $1::regclass`, s+".held").Scan(&persistence); err != nil {
				t.Fatal(err)
			}
			if persistence != tt.wantPersistence {
				t.Errorf("held's relpersistence after step 29 = %q; want %q", persistence, tt.wantPersistence)
			}
			if !heldMarked(t, d) {
				t.Error("held has no mark after step 29")
			}
			if got := receive(t, d, 5, time.Minute); len(got) != 0 {
				t.Fatalf("claim after step 29 with the cap's 2 leases in flight: %d messages; want none", len(got))
			}
			if n := heldRowsOf(t, d, "k"); n != 2 {
				t.Errorf("held rows of k = %d; want the 2 taken before step 29", n)
			}
		})
	}
}
