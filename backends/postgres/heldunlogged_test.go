package postgres

import (
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
