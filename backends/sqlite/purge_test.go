package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/settletest"
)

// count runs a query that returns one integer.
func (b *testBundle) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := b.drv.db.QueryRowContext(b.ctx, query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeAcrossRetentions: records written with a shorter retention
// after records with a longer one are purged when they expire, not when
// the older ones do, whichever generation holds them.
func TestPurgeAcrossRetentions(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	var long, short []*driver.ResultRecord
	for i := range 5 {
		long = append(long, rec(canon(100+i), driver.ResultSucceeded, time.Hour))
		short = append(short, rec(canon(200+i), driver.ResultSucceeded, -time.Second))
	}
	if err := b.drv.PutResults(b.ctx, long[:3]); err != nil {
		t.Fatal(err)
	}
	b.nextGeneration(t)
	if err := b.drv.PutResults(b.ctx, append(short, long[3:]...)); err != nil {
		t.Fatal(err)
	}
	if n, err := b.drv.PurgeResults(b.ctx, time.Now()); err != nil || n != 5 {
		t.Fatalf("purge = %d, %v; want the 5 expired records", n, err)
	}
	if left := b.count(t, `SELECT count(*) FROM jobq_results WHERE queue = 'default'`); left != 5 {
		t.Fatalf("%d records left; want the 5 live ones", left)
	}
}

// TestPurgeSkipsBoundGenerations: a purged generation below the newest
// keeps the lowest expiry of its records, and the next purge does not read
// it until then; when the generations above it lose all their records, so
// that it may receive records again, its bound goes in the same
// transaction, and the next purge reads it again.
func TestPurgeSkipsBoundGenerations(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{
		rec(canon(1), driver.ResultSucceeded, time.Hour), rec(canon(2), driver.ResultSucceeded, 2*time.Hour), rec(canon(3), driver.ResultSucceeded, -time.Second),
	}); err != nil {
		t.Fatal(err)
	}
	b.nextGeneration(t)
	if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec(canon(4), driver.ResultSucceeded, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.drv.PurgeResults(b.ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("purge = %d, %v; want 1", n, err)
	}
	want := micros(time.Now().Add(time.Hour))
	if got := b.count(t, `SELECT expiry FROM jobq_results_purge WHERE queue = 'default' AND gen = 0`); got > want || got < want-60e6 {
		t.Fatalf("generation 0's bound %d; want its lowest expiry, about %d", got, want)
	}
	if n := b.count(t, `SELECT count(*) FROM jobq_results_purge WHERE gen >= 0`); n != 1 {
		t.Fatalf("%d bounds; want generation 0's only (the newest has none)", n)
	}
	// Expire canon(1) behind the purge's back: the purge does not read
	// generation 0.
	if _, err := b.drv.db.ExecContext(b.ctx, `UPDATE jobq_results SET expires_at = 1 WHERE task_id = ?`, taskKey(canon(1))); err != nil {
		t.Fatal(err)
	}
	if n, err := b.drv.PurgeResults(b.ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("purge with the bound ahead = %d, %v; want 0 (generation 0 not read)", n, err)
	}
	// Generation 1 emptied: generation 0 is the newest again.
	if n, err := b.drv.DeleteResults(b.ctx, []string{canon(4)}); err != nil || n != 1 {
		t.Fatalf("delete = %d, %v", n, err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobq_results_purge WHERE gen >= 0`); n != 0 {
		t.Fatalf("%d bounds after the newest generation emptied; want none", n)
	}
	if n, err := b.drv.PurgeResults(b.ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("purge after the newest generation emptied = %d, %v; want canon(1)", n, err)
	}
	// A bound is kept only below the newest generation.
	err := b.drv.writeTx(b.ctx, "test", func(tx wtx) error {
		_, err := tx.Exec(purgeKeep, "default", 0, 1)
		return err
	})
	if n := b.count(t, `SELECT count(*) FROM jobq_results_purge WHERE gen >= 0`); err != nil || n != 0 {
		t.Fatalf("%d bounds (%v) after keeping one for the newest generation; want none", n, err)
	}
}

// TestPurgeBoundAfterReopening: a generation whose bound a purge computed
// may be reopened (the newer ones emptied) before the purge keeps the
// bound, take records that expire sooner, and fall below the newest again;
// the purge then keeps no bound, and the next one deletes those records.
// (The bound was kept, and the next purge skipped them.)
func TestPurgeBoundAfterReopening(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	put := func(id string, keep time.Duration) {
		t.Helper()
		if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec(id, driver.ResultSucceeded, keep)}); err != nil {
			t.Fatal(err)
		}
	}
	put(canon(1), 2*time.Hour) // generation 0
	b.nextGeneration(t)
	put(canon(2), time.Hour) // generation 1
	var reopened int64
	if err := b.drv.db.QueryRowContext(b.ctx, purgeReopened, b.drv.cfg.queue).Scan(&reopened); err != nil {
		t.Fatal(err)
	}
	// The purge's scan of generation 0.
	n, left, err := b.drv.purgeGen(b.ctx, 0, micros(time.Now()))
	if err != nil || n != 0 || left == 0 {
		t.Fatalf("purge of generation 0 = %d, bound %d, %v; want nothing deleted and a bound", n, left, err)
	}
	// Meanwhile: generation 1 emptied (and the other queue's row that
	// started it), generation 0 takes a record that has expired, and a
	// newer generation starts.
	if n, err := b.drv.DeleteResults(b.ctx, []string{canon(2)}); err != nil || n != 1 {
		t.Fatalf("delete = %d, %v", n, err)
	}
	if _, err := b.drv.db.ExecContext(b.ctx, `DELETE FROM jobq_results WHERE queue = 'filler'`); err != nil {
		t.Fatal(err)
	}
	put(canon(3), -time.Second)
	if g := b.count(t, `SELECT gen FROM jobq_results WHERE task_id = ?`, taskKey(canon(3))); g != 0 {
		t.Fatalf("the record went to generation %d; the check needs 0", g)
	}
	b.nextGeneration(t)
	put(canon(4), time.Hour)
	if err := b.drv.keepPurgeBounds(b.ctx, map[int64]int64{0: left}, reopened); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobq_results_purge WHERE gen >= 0`); n != 0 {
		t.Fatalf("%d bounds kept after a reopening; want none", n)
	}
	if n, err := b.drv.PurgeResults(b.ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("purge = %d, %v; want 1 (the expired record of generation 0)", n, err)
	}
}

// TestMigrateFromSchema3 upgrades a file jobq schema 3 made (its CLI),
// with records in two generations, and uses it: the expiry index is gone,
// every record reads as before, the purge deletes the expired records and
// the live records they hid, and a settlement stores its record.
func TestMigrateFromSchema3(t *testing.T) {
	t.Parallel()
	path := loadDump(t, "schema3.sql")
	const (
		done      = "237ed259586f82ede7fc9d0f4b7f49a3"
		dead      = "97eb786d7f07e17be1af7389fd6c7af3"
		cancelled = "addfe858d0266d63d06036b93898e253"
		ready     = "50d14325d7174aae5848c1529c6fdc2c"
		expired   = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0"
		hidden    = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1"
		hiddenBy  = "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2"
	)
	ctx := t.Context()
	d := openAt(t, path, "queue=q")
	b := &testBundle{drv: d, ctx: ctx, path: path}
	if v := b.count(t, `SELECT user_version FROM pragma_user_version`); v != schemaVersion {
		t.Errorf("user_version %d; want %d", v, schemaVersion)
	}
	if n := b.count(t, `SELECT count(*) FROM sqlite_master WHERE name = 'jobq_results_expiry'`); n != 0 {
		t.Errorf("the expiry index is still there")
	}
	if n := b.count(t, `SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'jobq_results_reopened'`); n != 1 {
		t.Errorf("no trigger jobq_results_reopened")
	}
	ids := []string{done, dead, cancelled, expired, hidden, hiddenBy, "custom-id"}
	const before = "[succeeded dead-lettered cancelled - dead-lettered - succeeded]"
	if s := fmt.Sprint(states(b.results(t, ids...))); s != before {
		t.Fatalf("records after the upgrade: %s; want %s", s, before)
	}
	other := openAt(t, path, "queue=other")
	if got, err := other.GetResults(ctx, []string{"2a5e41aeb18908b7679c37641b8dc8a3"}); err != nil || states(got)[0] != "succeeded" {
		t.Errorf("the other queue's record: %v, %v", got, err)
	}
	// expired, hiddenBy's expired record and the live one it hid.
	if n, err := d.PurgeResults(ctx, time.Now()); err != nil || n != 3 {
		t.Errorf("purge = %d, %v; want 3", n, err)
	}
	if s := fmt.Sprint(states(b.results(t, ids...))); s != before {
		t.Fatalf("records after the purge: %s; want %s", s, before)
	}
	if n := b.count(t, `SELECT count(*) FROM jobq_results WHERE queue = 'q' AND task_id IN (?, ?)`, taskKey(expired), taskKey(hiddenBy)); n != 0 {
		t.Errorf("%d records of the purged tasks left", n)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != ready {
		t.Fatalf("receive = %v, %v; want the ready task", got, err)
	}
	if errs := d.Complete(ctx, settletest.WithResults([]driver.Lease{got[0].Lease}, []*driver.ResultRecord{rec(ready, driver.ResultSucceeded, time.Hour)})); errs != nil {
		t.Fatalf("complete: %v", errs[0])
	}
	if s := fmt.Sprint(states(b.results(t, ready, done))); s != "[succeeded succeeded]" {
		t.Fatalf("records after use: %s", s)
	}
	// A generation-1 record: the file's rowids are below 1<<genShift.
	if n := b.count(t, `SELECT gen FROM jobq_results WHERE task_id = ?`, taskKey(ready)); n != 1 {
		t.Errorf("the new record is in generation %d; want 1, the queue's highest", n)
	}
}
