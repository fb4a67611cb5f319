package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/settletest"
)

// rec makes a record of task id in state st, expiring after ttl.
func rec(id string, st driver.ResultState, ttl time.Duration) *driver.ResultRecord {
	now := time.Now().Truncate(time.Microsecond)
	return &driver.ResultRecord{ID: id, State: st, UpdatedAt: now, ExpiresAt: now.Add(ttl), Data: []byte("data-" + id + "-" + string(st))}
}

// states returns the state of each record ("-" for none).
func states(recs []*driver.ResultRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = "-"
		if r != nil {
			out[i] = string(r.State)
		}
	}
	return out
}

func (b *testBundle) results(t *testing.T, ids ...string) []*driver.ResultRecord {
	t.Helper()
	got, err := b.drv.GetResults(b.ctx, ids)
	if err != nil {
		t.Fatalf("get results: %v", err)
	}
	return got
}

func TestResultsPutGet(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	want := rec("a", driver.ResultSucceeded, time.Hour)
	if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{want, rec("old", driver.ResultDeadLettered, -time.Second)}); err != nil {
		t.Fatal(err)
	}
	got := b.results(t, "missing", "a", "old", "a")
	if fmt.Sprint(states(got)) != "[- succeeded - succeeded]" {
		t.Fatalf("states = %v; want the expired record hidden", states(got))
	}
	g := got[1]
	if g.ID != "a" || string(g.Data) != string(want.Data) || !g.UpdatedAt.Equal(want.UpdatedAt) || !g.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("record = %+v; want %+v", g, want)
	}
	// A later end replaces the record.
	if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec("a", driver.ResultCancelled, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if s := states(b.results(t, "a")); s[0] != "cancelled" {
		t.Fatalf("after replace: %v", s)
	}
}

func TestResultsCancelRequestedInsertIfAbsent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing *driver.ResultRecord
		want     driver.ResultState
	}{
		{"none", nil, driver.ResultCancelRequested},
		{"ended", rec("t", driver.ResultSucceeded, time.Hour), driver.ResultSucceeded},
		{"expired end", rec("t", driver.ResultSucceeded, -time.Second), driver.ResultCancelRequested},
		{"cancel requested", rec("t", driver.ResultCancelRequested, time.Hour), driver.ResultCancelRequested},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "")
			if tt.existing != nil {
				if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{tt.existing}); err != nil {
					t.Fatal(err)
				}
			}
			req := rec("t", driver.ResultCancelRequested, time.Hour)
			req.Data = []byte("request")
			if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{req}); err != nil {
				t.Fatal(err)
			}
			got := b.results(t, "t")[0]
			if got == nil || got.State != tt.want {
				t.Fatalf("record after cancel request = %v; want state %s", got, tt.want)
			}
			if tt.existing != nil && tt.existing.State == driver.ResultCancelRequested && string(got.Data) != string(tt.existing.Data) {
				t.Fatalf("a second cancel request replaced the first: data %q", got.Data)
			}
			// An end always replaces a cancel request.
			if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec("t", driver.ResultCancelled, time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if s := states(b.results(t, "t")); s[0] != "cancelled" {
				t.Fatalf("end after cancel request: %v", s)
			}
		})
	}
}

func TestResultsBadRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	tests := []struct {
		name string
		rec  *driver.ResultRecord
	}{
		{"nil", nil},
		{"no id", rec("", driver.ResultSucceeded, time.Hour)},
		{"bad state", rec("x", "finished", time.Hour)},
		{"no expiry", &driver.ResultRecord{ID: "x", State: driver.ResultSucceeded}},
	}
	for _, tt := range tests {
		err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec("ok", driver.ResultSucceeded, time.Hour), tt.rec})
		wantCode(t, err, errcode.InvalidArgument)
	}
	if s := states(b.results(t, "ok")); s[0] != "-" {
		t.Fatalf("a batch with a bad record stored %v", s)
	}
}

func TestCompleteStoresRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("a"), msg("b"), msg("c"))
	got := b.receive(t, 3, time.Minute)
	if len(got) != 3 {
		t.Fatalf("received %d", len(got))
	}
	// b's lease is not held (a wrong token); c has no record to store.
	lost := got[1].Lease
	lost.Token = "not-the-token"
	leases := []driver.Lease{got[0].Lease, lost, got[2].Lease}
	recs := []*driver.ResultRecord{rec("a", driver.ResultSucceeded, time.Hour), rec("b", driver.ResultSucceeded, time.Hour), nil}
	errs := b.drv.Complete(b.ctx, settletest.WithResults(leases, recs))
	if errs == nil || errs[0] != nil || errcode.Of(errs[1]) != errcode.LockLost || errs[2] != nil {
		t.Fatalf("errs = %v; want only b LockLost", errs)
	}
	if s := states(b.results(t, "a", "b", "c")); fmt.Sprint(s) != "[succeeded - -]" {
		t.Fatalf("records = %v; want a record for a only (b lost its lease, c had none)", s)
	}
	if s := b.stats(t); s.InFlight != 1 {
		t.Fatalf("stats = %+v; want b still in flight", s)
	}
	// A bad record fails its own item and leaves its message alone.
	errs = b.drv.Complete(b.ctx, settletest.WithResults([]driver.Lease{got[1].Lease}, []*driver.ResultRecord{{ID: "b"}}))
	wantCode(t, errs[0], errcode.InvalidArgument)
	if s := b.stats(t); s.InFlight != 1 {
		t.Fatalf("a bad record settled its message: %+v", s)
	}
}

func TestDeadLetterStoresRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("a"), msg("b"))
	got := b.receive(t, 2, time.Minute)
	lost := got[1].Lease
	lost.Token = "not-the-token"
	reqs := []driver.DeadLetterParams{{Lease: got[0].Lease, Reason: "failed"}, {Lease: lost, Reason: "failed"}}
	recs := []*driver.ResultRecord{rec("a", driver.ResultDeadLettered, time.Hour), rec("b", driver.ResultDeadLettered, time.Hour)}
	errs := b.drv.DeadLetter(b.ctx, settletest.DeadWithResults(reqs, recs))
	if errs == nil || errs[0] != nil || errcode.Of(errs[1]) != errcode.LockLost {
		t.Fatalf("errs = %v; want b LockLost", errs)
	}
	if s := states(b.results(t, "a", "b")); fmt.Sprint(s) != "[dead-lettered -]" {
		t.Fatalf("records = %v", s)
	}
	if s := b.stats(t); s.Dead != 1 || s.InFlight != 1 {
		t.Fatalf("stats = %+v; want a dead, b in flight", s)
	}
}

func TestPurgeResultsInBatches(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	const expired = 2*purgeBatch + 7
	var recs []*driver.ResultRecord
	for i := range expired {
		recs = append(recs, rec(fmt.Sprint("old", i), driver.ResultSucceeded, -time.Minute))
	}
	recs = append(recs, rec("live", driver.ResultSucceeded, time.Hour))
	if err := b.drv.PutResults(b.ctx, recs); err != nil {
		t.Fatal(err)
	}
	// Another queue's expired record in the same file is not this queue's
	// to purge.
	other := openAt(t, b.path, "queue=other")
	if err := other.PutResults(b.ctx, []*driver.ResultRecord{rec("old0", driver.ResultSucceeded, -time.Minute)}); err != nil {
		t.Fatal(err)
	}
	n, err := b.drv.PurgeResults(b.ctx, time.Now())
	if err != nil || n != expired {
		t.Fatalf("purge = %d, %v; want %d", n, err, expired)
	}
	if n, err := b.drv.PurgeResults(b.ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("second purge = %d, %v; want 0", n, err)
	}
	count := func(q string) (n int) {
		t.Helper()
		if err := b.drv.db.QueryRowContext(b.ctx, `SELECT COUNT(*) FROM jobq_results WHERE queue = ?`, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if c := count("default"); c != 1 {
		t.Fatalf("%d records left; want the live one", c)
	}
	if c := count("other"); c != 1 {
		t.Fatalf("the other queue's record was purged")
	}
}

// TestPurgeBatchChecksExpiry: a purge batch deletes, of the rowids it is
// given (read before its write transaction), only the queue's records
// that have expired, so a record replaced or renewed meanwhile, or
// another queue's, is never deleted early.
func TestPurgeBatchChecksExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec("old", driver.ResultSucceeded, -time.Minute), rec("live", driver.ResultSucceeded, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	other := openAt(t, b.path, "queue=other")
	if err := other.PutResults(b.ctx, []*driver.ResultRecord{rec("old", driver.ResultSucceeded, -time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var list string
	if err := b.drv.db.QueryRowContext(b.ctx, `SELECT json_group_array(rowid) FROM jobq_results`).Scan(&list); err != nil {
		t.Fatal(err)
	}
	var deleted int64
	err := b.drv.writeTx(b.ctx, "test", func(tx wtx) error {
		res, err := tx.Exec(purgeResultsBatch, b.drv.cfg.queue, micros(time.Now()), list)
		if err != nil {
			return err
		}
		deleted, err = res.RowsAffected()
		return err
	})
	if err != nil || deleted != 1 {
		t.Fatalf("the purge batch of every rowid deleted %d (%v); want the queue's expired record", deleted, err)
	}
	if got := states(b.results(t, "live")); got[0] != "succeeded" {
		t.Fatalf("live record after the batch: %v", got)
	}
	var n int
	if err := b.drv.db.QueryRowContext(b.ctx, `SELECT count(*) FROM jobq_results WHERE queue = 'other'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("other queue's records %d (%v); want its expired one kept", n, err)
	}
}

func TestRemoveTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("ready"), msg("flight"), msg("dead"), msg("expired"))
	b.push(t, &driver.Message{ID: "delayed", Body: []byte("x"), NotBefore: time.Now().Add(time.Hour)})
	got := b.receive(t, 3, time.Minute) // ready, flight, dead in push order
	if fmt.Sprint(ids(got)) != "[ready flight dead]" {
		t.Fatalf("received %v", ids(got))
	}
	// Put ready back; dead-letter dead; leave flight in flight.
	if errs := b.drv.Requeue(b.ctx, []driver.RequeueParams{{Lease: got[0].Lease}}); errs != nil {
		t.Fatal(errs)
	}
	if errs := b.drv.DeadLetter(b.ctx, []driver.DeadLetterParams{{Lease: got[2].Lease, Reason: "x"}}); errs != nil {
		t.Fatal(errs)
	}
	b.receive(t, 2, time.Millisecond) // ready and expired, on a lease that runs out at once
	time.Sleep(5 * time.Millisecond)
	asked := []string{"ready", "flight", "dead", "expired", "delayed", "unknown"}
	var requested, cancelled []*driver.ResultRecord
	for _, id := range asked {
		requested = append(requested, rec(id, driver.ResultCancelRequested, time.Hour))
		cancelled = append(cancelled, rec(id, driver.ResultCancelled, time.Hour))
	}
	if err := b.drv.PutResults(b.ctx, requested); err != nil {
		t.Fatal(err)
	}
	removed, _, err := b.drv.RemoveTasks(b.ctx, cancelled, nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if fmt.Sprint(removed) != "[delayed expired ready]" {
		t.Fatalf("removed %v; want ready, delayed and the expired lease's message", removed)
	}
	// The removal stored the removed tasks' records, and only theirs.
	recs := states(b.results(t, asked...))
	if want := "[cancelled cancel-requested cancel-requested cancelled cancelled cancel-requested]"; fmt.Sprint(recs) != want {
		t.Fatalf("records after remove = %v; want %s", recs, want)
	}
	if _, _, err := b.drv.RemoveTasks(b.ctx, []*driver.ResultRecord{{ID: "ready", State: driver.ResultCancelled}}, nil); errcode.Of(err) != errcode.InvalidArgument {
		t.Fatalf("remove with a record without expiry: %v; want InvalidArgument", err)
	}
	if s := b.stats(t); s != (driver.Stats{InFlight: 1, Dead: 1}) {
		t.Fatalf("stats after remove = %+v; want flight in flight, dead dead", s)
	}
	if removed, _, err := b.drv.RemoveTasks(b.ctx, nil, nil); err != nil || len(removed) != 0 {
		t.Fatalf("remove nothing = %v, %v", removed, err)
	}
}

func TestWaitResults(t *testing.T) {
	t.Parallel()
	b := setup(t, "poll=5ms")
	// Another process's write: straight into the file, without this
	// process's wake-up.
	raw, err := sql.Open("sqlite", "file:"+b.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	tests := []struct {
		name  string
		store func(r *driver.ResultRecord) error
	}{
		{"this process", func(r *driver.ResultRecord) error { return b.drv.PutResults(b.ctx, []*driver.ResultRecord{r}) }},
		{"other process", func(r *driver.ResultRecord) error {
			_, err := raw.ExecContext(b.ctx, `INSERT INTO jobq_results (queue, gen, task_id, state, updated_at, expires_at, data) VALUES (?, 0, ?, ?, ?, ?, ?)`,
				"default", taskKey(r.ID), string(r.State), micros(r.UpdatedAt), micros(r.ExpiresAt), r.Data)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "w-" + tt.name
			done := make(chan error, 1)
			go func() {
				// Wake-ups may come early: wait again until the record is
				// there, as the portable layer does.
				for {
					if err := b.drv.WaitResults(b.ctx, []string{id}, time.Hour); err != nil {
						done <- err
						return
					}
					got, err := b.drv.GetResults(b.ctx, []string{id})
					if err != nil || got[0] != nil {
						done <- err
						return
					}
				}
			}()
			if err := tt.store(rec(id, driver.ResultSucceeded, time.Hour)); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Minute):
				t.Fatal("WaitResults did not return after the record was stored")
			}
			// A wait for a task that has ended returns at once.
			if err := b.drv.WaitResults(b.ctx, []string{"none", id}, time.Hour); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWaitResultsTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, "poll=5ms")
	if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec("c", driver.ResultCancelRequested, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A cancel request is no end: the wait runs out.
	if err := b.drv.WaitResults(b.ctx, []string{"c"}, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	wantCode(t, b.drv.WaitResults(ctx, []string{"c"}, time.Hour), errcode.Canceled)
}

func TestResultsTableAddedToExistingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	d := openAt(t, path, "")
	if _, err := d.Push(t.Context(), []*driver.Message{msg("kept")}); err != nil {
		t.Fatal(err)
	}
	// Make the file what a build before result records left.
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TABLE jobq_results`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	d.Close()

	d = openAt(t, path, "")
	if err := d.PutResults(t.Context(), []*driver.ResultRecord{rec("kept", driver.ResultSucceeded, time.Hour)}); err != nil {
		t.Fatalf("records on a migrated file: %v", err)
	}
	got, err := d.GetResults(t.Context(), []string{"kept"})
	if err != nil || got[0] == nil {
		t.Fatalf("get = %v, %v", got, err)
	}
	r, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute})
	if err != nil || len(r) != 1 || r[0].ID != "kept" {
		t.Fatalf("the queued message did not survive the migration: %v, %v", r, err)
	}
}

// nextGeneration makes the records b's driver stores next go to a new
// generation, with a record of another queue at the next generation's
// first rowid.
func (b *testBundle) nextGeneration(t *testing.T) {
	t.Helper()
	if _, err := b.drv.db.ExecContext(b.ctx, `INSERT INTO jobq_results (rowid, queue, gen, task_id, state, updated_at, expires_at, data)
		VALUES (((SELECT coalesce(max(rowid), 0) >> ?1 FROM jobq_results) + 1) << ?1, 'filler', 0, 'filler', 'succeeded', 0, 0, x'')`, genShift); err != nil {
		t.Fatal(err)
	}
}

// TestResultGenerations: a task whose records lie in two generations reads
// as its newer one, a cancel request never hides an older generation's
// end, and the purge never brings a hidden record back.
func TestResultGenerations(t *testing.T) {
	t.Parallel()
	id := canon(40)
	tests := []struct {
		name     string
		old, new *driver.ResultRecord
		want     string // the state read before and after the purge, "-" for none
		left     int    // the task's records after the purge
	}{
		{"end replaces an older end", rec(id, driver.ResultSucceeded, time.Hour), rec(id, driver.ResultDeadLettered, time.Hour), "dead-lettered", 2},
		{"cancel request keeps an older end", rec(id, driver.ResultSucceeded, time.Hour), rec(id, driver.ResultCancelRequested, time.Hour), "succeeded", 1},
		{"cancel request replaces an older expired end", rec(id, driver.ResultSucceeded, -time.Second), rec(id, driver.ResultCancelRequested, time.Hour), "cancel-requested", 1},
		{"expired end hides an older live one", rec(id, driver.ResultSucceeded, time.Hour), rec(id, driver.ResultDeadLettered, -time.Second), "-", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "")
			if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{tt.old}); err != nil {
				t.Fatal(err)
			}
			b.nextGeneration(t)
			if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{tt.new}); err != nil {
				t.Fatal(err)
			}
			var gens int
			if err := b.drv.db.QueryRowContext(b.ctx, `SELECT COUNT(DISTINCT gen) FROM jobq_results WHERE queue = 'default'`).Scan(&gens); err != nil {
				t.Fatal(err)
			}
			if gens != 2 && tt.left == 2 {
				t.Fatalf("records in %d generations, want 2", gens)
			}
			if s := states(b.results(t, id))[0]; s != tt.want {
				t.Fatalf("state %s, want %s", s, tt.want)
			}
			if _, err := b.drv.PurgeResults(b.ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			if s := states(b.results(t, id))[0]; s != tt.want {
				t.Fatalf("state after the purge %s, want %s", s, tt.want)
			}
			var left int
			if err := b.drv.db.QueryRowContext(b.ctx, `SELECT COUNT(*) FROM jobq_results WHERE queue = 'default' AND task_id = ?`, taskKey(id)).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != tt.left {
				t.Fatalf("%d records of the task left after the purge, want %d", left, tt.left)
			}
		})
	}
}

// TestResultGenerationNeverGoesBack: when the rowids fall below the
// queue's highest generation (a VACUUM may renumber them), a new record
// still replaces its task's newest rather than landing, hidden, in a lower
// generation.
func TestResultGenerationNeverGoesBack(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	id := canon(41)
	b.nextGeneration(t)
	if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec(id, driver.ResultSucceeded, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// Renumber every row down to small rowids, as a VACUUM may.
	if _, err := b.drv.db.ExecContext(b.ctx, `DELETE FROM jobq_results WHERE queue = 'filler'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.drv.db.ExecContext(b.ctx, `UPDATE jobq_results SET rowid = 7 WHERE queue = 'default'`); err != nil {
		t.Fatal(err)
	}
	if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec(id, driver.ResultDeadLettered, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if s := states(b.results(t, id))[0]; s != string(driver.ResultDeadLettered) {
		t.Fatalf("state %s after a new record, want dead-lettered", s)
	}
}

// TestMigrateFromSchema2 upgrades a file jobq schema 2 made (its CLI),
// whose records are keyed by text, and uses it: every record reads as
// before, in its own queue, the expired one stays hidden and is purged,
// a cancel request does not hide an end, and the lease a process of
// schema 2 held settles with its record.
func TestMigrateFromSchema2(t *testing.T) {
	t.Parallel()
	path := loadDump(t, "schema2.sql")
	const (
		done      = "237ed259586f82ede7fc9d0f4b7f49a3"
		dead      = "97eb786d7f07e17be1af7389fd6c7af3"
		cancelled = "eec92c23255bbc0b002029a1e3d98ff0"
		expired   = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0"
	)
	ctx := t.Context()
	// The ready task, claimed by a process of schema 2 before the upgrade.
	const oldLease = "0123456789abcdef0123456789" // 26 digits, as schema 2 writes
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `UPDATE jobq_messages SET lease = ?, visible_at = ?, deliveries = 1 WHERE id = 4`,
		oldLease, micros(time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	d := openAt(t, path, "queue=q")
	var version, blobs int
	if err := d.db.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version),
		(SELECT COUNT(*) FROM jobq_results WHERE typeof(task_id) = 'blob')`).Scan(&version, &blobs); err != nil {
		t.Fatal(err)
	}
	if version != schemaVersion || blobs != 5 {
		t.Errorf("user_version %d, %d records keyed by 16 bytes; want %d, 5", version, blobs, schemaVersion)
	}
	ids := []string{done, dead, cancelled, "custom-id", expired}
	got, err := d.GetResults(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(states(got)); s != "[succeeded dead-lettered cancelled succeeded -]" {
		t.Fatalf("records after the upgrade: %s", s)
	}
	if got[0].ID != done || !slices.Contains(got[0].Data, '{') {
		t.Errorf("record of %s: %+v", done, got[0])
	}
	other := openAt(t, path, "queue=other")
	if got, err := other.GetResults(ctx, []string{done}); err != nil || states(got)[0] != "dead-lettered" {
		t.Errorf("the other queue's record: %v, %v", got, err)
	}
	if n, err := d.PurgeResults(ctx, time.Now()); err != nil || n != 1 {
		t.Errorf("purge = %d, %v; want the expired record", n, err)
	}
	if err := d.PutResults(ctx, []*driver.ResultRecord{rec(done, driver.ResultCancelRequested, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	const ready = "50d14325d7174aae5848c1529c6fdc2c"
	if errs := d.Complete(ctx, settletest.WithResults([]driver.Lease{{MessageID: "4", Token: oldLease}}, []*driver.ResultRecord{rec(ready, driver.ResultSucceeded, time.Hour)})); errs != nil {
		t.Fatalf("complete with the lease taken before the upgrade: %v", errs[0])
	}
	if err := d.WaitResults(ctx, []string{ready}, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err = d.GetResults(ctx, []string{done, ready, expired})
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(states(got)); s != "[succeeded succeeded -]" {
		t.Fatalf("records after use: %s", s)
	}
}
