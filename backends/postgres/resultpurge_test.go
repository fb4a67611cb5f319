package postgres

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
)

// putMany stores n records named prefix0, prefix1, ... that expire after
// ttl, in batches of 1,000.
func putMany(t *testing.T, d *Driver, prefix string, n int, ttl time.Duration) {
	t.Helper()
	for lo := 0; lo < n; lo += 1000 {
		var recs []*driver.ResultRecord
		for i := lo; i < min(lo+1000, n); i++ {
			recs = append(recs, rec(prefix+strconv.Itoa(i), driver.ResultSucceeded, ttl))
		}
		putResults(t, d, recs...)
	}
}

// explainGeneric returns the plan that the pool's connections run sql
// with (a generic plan: plans.go), prepared with the parameter types
// types and run with the arguments args (SQL literals), with the EXPLAIN
// options opts.
func explainGeneric(t *testing.T, tx pgx.Tx, opts, sql, types, args string) string {
	t.Helper()
	ctx := ctxT(t)
	if _, err := tx.Exec(ctx, `PREPARE purge_plan (`+types+`) AS `+sql); err != nil {
		t.Fatal(err)
	}
	defer tx.Exec(ctx, `DEALLOCATE purge_plan`)
	rows, err := tx.Query(ctx, `EXPLAIN (`+opts+`) EXECUTE purge_plan (`+args+`)`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// expiredArgs are the arguments of the purge's look for expired records
// of d's queue, as SQL literals.
func expiredArgs(d *Driver) string {
	return "'" + strings.ReplaceAll(d.cfg.queue, "'", "''") + "', now(), " + strconv.Itoa(purgeScan)
}

var heapBlocks = regexp.MustCompile(`Heap Blocks:(?: exact=(\d+))?(?: lossy=(\d+))?`)

// purgeLookReads returns how many pages of the results table the purge's
// look for expired records reads now (EXPLAIN ANALYZE).
func purgeLookReads(t *testing.T, d *Driver) int {
	t.Helper()
	var plan string
	err := d.withBitmapScans(ctxT(t), func(tx pgx.Tx) error {
		plan = explainGeneric(t, tx, "ANALYZE, COSTS OFF, TIMING OFF", d.rsql.purge.expired, "text, timestamptz, integer", expiredArgs(d))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "Bitmap Index Scan on results_expiry") {
		t.Fatalf("the look does not use the expiry index:\n%s", plan)
	}
	n := 0
	for _, m := range heapBlocks.FindAllStringSubmatch(plan, -1) {
		for _, v := range m[1:] {
			k, _ := strconv.Atoi(v)
			n += k
		}
	}
	return n
}

// waitAllSeeDeletes waits until no transaction or snapshot older than
// now remains in the database, so that rows deleted before are dead to
// VACUUM and to a summary.
func waitAllSeeDeletes(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := ctxT(t)
	var x int64
	if err := pool.QueryRow(ctx, `SELECT txid_current()`).Scan(&x); err != nil {
		t.Fatal(err)
	}
	for {
		var past bool
		if err := pool.QueryRow(ctx, `SELECT txid_snapshot_xmin(txid_current_snapshot()) > $1 AND NOT EXISTS (
			SELECT FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
				AND age(backend_xmin) >= age(($1 % 4294967296)::text::xid))`, x).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("a transaction older than the purge never ended")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestPurgeReadsTheExpiredRanges: the purge summarises the expiry index's
// new ranges itself, so that it reads the pages of the expired records and
// not the others, with no VACUUM in between; and it drops the summaries of
// the ranges it deleted from, so that the records stored into the space it
// freed are not read by every later purge.
func TestPurgeReadsTheExpiredRanges(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	d := openResults(t, "schema="+schema)
	table := pgx.Identifier{schema, "results"}.Sanitize()
	// Autovacuum would summarise ranges too, behind the test's back.
	if _, err := pool.Exec(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	const expired, live = 3000, 30000
	putMany(t, d, "old", expired, -time.Minute)
	putMany(t, d, "new", live, time.Hour)
	var oldPages, pages int
	if err := pool.QueryRow(ctx, `SELECT max((ctid::text::point)[0])::int + 1 FROM `+table+` WHERE task_id LIKE 'old%'`).Scan(&oldPages); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT (pg_relation_size($1::regclass) / 8192)::int`, table).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages < 8*oldPages {
		t.Fatalf("the live records take %d pages besides the expired ones' %d; the test needs them to take more", pages-oldPages, oldPages)
	}
	if got := purgeLookReads(t, d); got < pages-expiryRange {
		t.Fatalf("before any summary the look read %d of %d pages; want all (ranges with no summary are read whole)", got, pages)
	}

	if n, err := d.PurgeResults(ctx, time.Now()); err != nil || n != expired {
		t.Fatalf("purge = %d, %v; want %d", n, err, expired)
	}
	if left := states(getResults(t, d, "old0", "old2999", "new0", fmt.Sprint("new", live-1))); fmt.Sprint(left) != "[- - succeeded succeeded]" {
		t.Fatalf("after the purge: %v; want the expired records gone and the live kept", left)
	}
	// The ranges of the live records were summarised by the purge: only
	// those it deleted from (summaries dropped) are read again.
	maxRead := (oldPages/expiryRange + 1) * expiryRange
	if got := purgeLookReads(t, d); got == 0 || got > maxRead {
		t.Fatalf("after the purge the look read %d of %d pages; want the expired records' ranges, %d pages at most", got, pages, maxRead)
	}

	// VACUUM frees the purged space, new records fill it, and the next
	// purge summarises those ranges from what they hold now: nothing has
	// expired, so the look reads (almost) nothing.
	waitAllSeeDeletes(t, pool)
	if _, err := pool.Exec(ctx, `VACUUM `+table); err != nil {
		t.Fatal(err)
	}
	putMany(t, d, "again", expired, time.Hour)
	if n, err := d.PurgeResults(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("second purge = %d, %v; want 0", n, err)
	}
	if got := purgeLookReads(t, d); got > oldPages/2 {
		t.Fatalf("with nothing expired the look read %d pages; the ranges of the first purge kept their old summaries", got)
	}
}

// TestExpiryIndexMigrated: a schema made before step 18 (a B-tree expiry
// index) gets the BRIN index, and its records are purged through it.
func TestExpiryIndexMigrated(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	if err := migrateSteps(ctx, pool, schema, migrations[:17]); err != nil {
		t.Fatal(err)
	}
	table := pgx.Identifier{schema, "results"}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (queue, task_id, state, updated_at, expires_at, data) VALUES
		('old', 'gone', 'succeeded', now() - interval '2 days', now() - interval '1 day', ''),
		('old', 'kept', 'succeeded', now(), now() + interval '1 day', '')`); err != nil {
		t.Fatal(err)
	}
	d := openResults(t, "schema="+schema, "queue=old")
	var method string
	if err := pool.QueryRow(ctx, `SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = $1::regclass`,
		pgx.Identifier{schema, "results_expiry"}.Sanitize()).Scan(&method); err != nil || method != "brin" {
		t.Fatalf("expiry index method %q, %v; want brin", method, err)
	}
	if n, err := d.PurgeResults(ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("purge = %d, %v; want 1", n, err)
	}
	if s := states(getResults(t, d, "gone", "kept")); fmt.Sprint(s) != "[- succeeded]" {
		t.Fatalf("records after the purge: %v", s)
	}
}
