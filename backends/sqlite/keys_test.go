package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// keyRows is the queue's dedup keys: task ID → message ID.
func keyRows(t *testing.T, d *Driver) map[string]int64 {
	t.Helper()
	rows, err := d.db.QueryContext(t.Context(), `SELECT task_id, message_id FROM jobq_task_keys WHERE queue = ?`, d.cfg.queue)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var key any
		var id int64
		if err := rows.Scan(&key, &id); err != nil {
			t.Fatal(err)
		}
		tid, _, _ := loadTask(key, []byte{}, nil)
		out[tid] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pushOne pushes a message with the task ID id and returns its result.
func (b *testBundle) pushOne(t *testing.T, id string) driver.PushResult {
	t.Helper()
	return b.push(t, &driver.Message{ID: id, Body: []byte(`{"id": "` + id + `"}`)})[0]
}

// TestDedupAfterLazyRemoval: whichever way a message leaves the queue, its
// key stays behind, stale, and neither makes a push of the same ID a
// duplicate nor fails it; the new message's key then deduplicates.
func TestDedupAfterLazyRemoval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		settle func(t *testing.T, b *testBundle, id string)
	}{
		{"complete", func(t *testing.T, b *testBundle, _ string) {
			r := b.receive(t, 1, time.Minute)
			if errs := b.drv.Complete(b.ctx, driver.Completions(r[0].Lease)); errs != nil {
				t.Fatal(errs[0])
			}
		}},
		{"dead-letter", func(t *testing.T, b *testBundle, _ string) {
			r := b.receive(t, 1, time.Minute)
			if errs := b.drv.DeadLetter(b.ctx, []driver.DeadLetterParams{{Lease: r[0].Lease, Reason: "r"}}); errs != nil {
				t.Fatal(errs[0])
			}
		}},
		{"remove", func(t *testing.T, b *testBundle, id string) {
			if removed, _, err := b.drv.RemoveTasks(b.ctx, []*driver.ResultRecord{rec(id, driver.ResultCancelled, time.Hour)}, nil); err != nil || len(removed) != 1 {
				t.Fatalf("remove: %v, %v", removed, err)
			}
		}},
		{"clear", func(t *testing.T, b *testBundle, _ string) {
			if n, err := b.drv.Clear(b.ctx); err != nil || n != 1 {
				t.Fatalf("clear: %d, %v", n, err)
			}
		}},
	}
	for _, tc := range tests {
		for _, id := range []string{canon(1), "custom-id"} {
			t.Run(tc.name+"/"+id, func(t *testing.T) {
				t.Parallel()
				b := setup(t, "queue=q")
				first := b.pushOne(t, id)
				if first.Duplicate {
					t.Fatal("first push was a duplicate")
				}
				if again := b.pushOne(t, id); !again.Duplicate || again.MessageID != first.MessageID {
					t.Fatalf("push of a queued ID: %+v, want a duplicate of %s", again, first.MessageID)
				}
				tc.settle(t, b, id)
				if got := keyRows(t, b.drv); fmt.Sprint(got[id]) != first.MessageID {
					t.Errorf("keys after %s: %v, want the stale key left for %s", tc.name, got, first.MessageID)
				}
				second := b.pushOne(t, id)
				if second.Duplicate || second.MessageID == first.MessageID {
					t.Fatalf("push after %s: %+v, want a new message", tc.name, second)
				}
				if third := b.pushOne(t, id); !third.Duplicate || third.MessageID != second.MessageID {
					t.Fatalf("push of the requeued ID: %+v, want a duplicate of %s", third, second.MessageID)
				}
				if other := b.pushOne(t, canon(2)); other.Duplicate {
					t.Fatalf("push of a new ID beside a stale key: %+v", other)
				}
				got := ids(b.receive(t, 10, time.Minute))
				slices.Sort(got)
				if want := []string{canon(2), id}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
					t.Errorf("received %v, want %v", got, want)
				}
			})
		}
	}
}

// TestSweepKeys: a sweep, in chunks with pushes and completions in
// between, deletes the stale keys it is meant to find and keeps every
// live one, including keys pushed again while it runs, behind and ahead of
// its cursor. A cheap sweep finds the keys of messages below the
// smallest live message ID; an exact one finds them all.
func TestSweepKeys(t *testing.T) {
	t.Parallel()
	const n = 30
	tests := []struct {
		name  string
		exact bool
		done  func(i int) bool // completed before the sweep (IDs 1..n)
		stale func(i int) bool // the keys the sweep deletes
	}{
		{"cheap, drained from the head", false, func(i int) bool { return i <= 20 }, func(i int) bool { return i <= 20 }},
		{"cheap, out of order", false, func(i int) bool { return i%2 == 0 }, func(i int) bool { return false }},
		{"exact, out of order", true, func(i int) bool { return i%2 == 0 }, func(i int) bool { return i%2 == 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "queue=q")
			msgID := map[string]string{}
			for i := 1; i <= n; i++ {
				msgID[canon(i)] = b.pushOne(t, canon(i)).MessageID
			}
			var leases []driver.Lease
			for _, r := range b.receive(t, n, time.Minute) {
				var i int
				if _, err := fmt.Sscanf(r.ID, "%x", &i); err != nil {
					t.Fatal(err)
				}
				if tc.done(i) {
					leases = append(leases, r.Lease)
				}
			}
			if errs := b.drv.Complete(b.ctx, driver.Completions(leases...)); errs != nil {
				t.Fatal(errs)
			}
			var seq int64
			if err := b.drv.db.QueryRowContext(b.ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'jobq_messages'`).Scan(&seq); err != nil {
				t.Fatal(err)
			}
			exact := int64(0)
			if tc.exact {
				exact = seq
			}
			if _, err := b.drv.db.ExecContext(b.ctx, saveSweep, "q", 0, 0, sweepStart, seq, exact, 0); err != nil {
				t.Fatal(err)
			}
			step := func() bool {
				var running bool
				err := b.drv.writeTx(b.ctx, "sweep", func(tx wtx) (err error) {
					running, err = b.drv.sweepKeys(tx, 7, true)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return running
			}
			if !step() {
				t.Fatal("the sweep ended after one chunk of 7 keys")
			}
			// Pushed again while the sweep runs: 2 is behind its cursor, 10
			// ahead; both were completed in every case but the first's 10.
			repushed := map[string]bool{}
			for _, i := range []int{2, 10} {
				if r := b.pushOne(t, canon(i)); !r.Duplicate {
					repushed[canon(i)] = true
					msgID[canon(i)] = r.MessageID
				}
			}
			for step() {
			}
			want := map[string]string{}
			for i := 1; i <= n; i++ {
				if id := canon(i); repushed[id] || !tc.stale(i) {
					want[id] = msgID[id]
				}
			}
			got := map[string]string{}
			for id, m := range keyRows(t, b.drv) {
				got[id] = fmt.Sprint(m)
			}
			if !maps.Equal(got, want) {
				t.Errorf("keys after the sweep:\n got %v\nwant %v", got, want)
			}
			var keys int64
			var at any
			if err := b.drv.db.QueryRowContext(b.ctx, `SELECT seq, keys, at FROM jobq_key_sweeps WHERE queue = 'q'`).Scan(&seq, &keys, &at); err != nil {
				t.Fatal(err)
			}
			// The sweep counts the keys it passed and kept: not 2's when it
			// deleted it and the push put it back behind its cursor.
			kept := len(want)
			if repushed[canon(2)] && tc.stale(2) {
				kept--
			}
			if keys != int64(kept) || at != nil {
				t.Errorf("sweep state: %d keys, cursor %v; want %d, none", keys, at, kept)
			}
			// Dedup holds: live IDs are duplicates, completed ones are not.
			for i := 1; i <= n; i++ {
				id := canon(i)
				live := repushed[id] || !tc.done(i)
				if r := b.pushOne(t, id); r.Duplicate != live {
					t.Errorf("push of %s after the sweep: duplicate %v, want %v", id, r.Duplicate, live)
				}
			}
		})
	}
}

// TestExactSweepStopsEarly: an exact sweep whose first chunk finds few
// stale keys stops there and records an upper bound of the keys.
func TestExactSweepStopsEarly(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=q")
	for i := 1; i <= 30; i++ {
		b.pushOne(t, canon(i))
	}
	// Message 30 (key 30, the last in key order) is completed.
	for _, r := range b.receive(t, 30, time.Minute) {
		if r.ID == canon(30) {
			if errs := b.drv.Complete(b.ctx, driver.Completions(r.Lease)); errs != nil {
				t.Fatal(errs[0])
			}
		}
	}
	if _, err := b.drv.db.ExecContext(b.ctx, saveSweep, "q", 0, 0, sweepStart, 30, 30, 0); err != nil {
		t.Fatal(err)
	}
	var running bool
	err := b.drv.writeTx(b.ctx, "sweep", func(tx wtx) (err error) {
		running, err = b.drv.sweepKeys(tx, 7, true)
		return err
	})
	if err != nil || running {
		t.Fatalf("sweep step: running %v, %v; want it stopped", running, err)
	}
	var seq, keys int64
	var at any
	if err := b.drv.db.QueryRowContext(b.ctx, `SELECT seq, keys, at FROM jobq_key_sweeps WHERE queue = 'q'`).Scan(&seq, &keys, &at); err != nil {
		t.Fatal(err)
	}
	if seq != 30 || keys != 30 || at != nil {
		t.Errorf("sweep state: seq %d, %d keys, cursor %v; want 30, 30, none", seq, keys, at)
	}
	if got := len(keyRows(t, b.drv)); got != 30 {
		t.Errorf("%d keys after the stopped sweep, want all 30", got)
	}
}

// TestSweepWhenIdle: once a queue is drained, an idle receiver sweeps its
// keys away, and the queue works on.
func TestSweepWhenIdle(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=q")
	for i := 1; i <= 50; i++ {
		b.pushOne(t, canon(i))
	}
	for _, r := range b.receive(t, 50, time.Minute) {
		if errs := b.drv.Complete(b.ctx, driver.Completions(r.Lease)); errs != nil {
			t.Fatal(errs[0])
		}
	}
	if got := len(keyRows(t, b.drv)); got != 50 {
		t.Fatalf("%d keys after the drain, want the 50 stale ones", got)
	}
	if got, err := b.drv.Receive(b.ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 50 * time.Millisecond}); err != nil || len(got) != 0 {
		t.Fatalf("idle receive: %v, %v", got, err)
	}
	if got := keyRows(t, b.drv); len(got) != 0 {
		t.Errorf("keys after an idle receive: %v, want none", got)
	}
	if r := b.pushOne(t, canon(1)); r.Duplicate {
		t.Error("push after the sweep was a duplicate")
	}
	if r := b.pushOne(t, canon(1)); !r.Duplicate {
		t.Error("second push after the sweep was not a duplicate")
	}
}

// TestSweepDue: when a sweep starts, and whether it is exact.
func TestSweepDue(t *testing.T) {
	t.Parallel()
	live := func(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: true} }
	tests := []struct {
		name         string
		s            sweep
		idle         bool
		start, exact bool
	}{
		{"nothing pushed", sweep{seq: 500_000, minLive: live(500_000), lastSeq: 500_000, keys: 10}, false, false, false},
		{"few pushed", sweep{seq: 50_000, minLive: live(1)}, false, false, false},
		{"floor pushed", sweep{seq: sweepFloor, minLive: live(1)}, false, true, true},
		{"fourfold pushed", sweep{seq: 1_400_000, minLive: live(1), lastSeq: 1_000_000, keys: 100_000}, false, true, true},
		{"under fourfold", sweep{seq: 1_300_000, minLive: live(1), lastSeq: 1_000_000, keys: 100_000}, false, false, false},
		{"half gone", sweep{seq: 1_300_000, minLive: live(1_200_000), lastSeq: 1_000_000, keys: 300_000}, false, true, false},
		{"under half gone", sweep{seq: 1_300_000, minLive: live(1_100_000), lastSeq: 1_000_000, keys: 300_000}, false, false, false},
		{"all gone, under the floor", sweep{seq: 1_050_000, lastSeq: 1_000_000, keys: 20}, false, false, false},
		{"idle, nothing pushed", sweep{seq: 10, lastSeq: 10, keys: 5}, true, false, false},
		{"idle, drained", sweep{seq: 1_000_000, lastSeq: 999_000, keys: 1_000_000}, true, true, false},
		{"idle, delayed backlog", sweep{seq: 1_000_100, minLive: live(5), lastSeq: 1_000_000, keys: 1_000_000}, true, false, false},
		{"idle, pushed an eighth", sweep{seq: 1_200_000, minLive: live(5), lastSeq: 1_000_000, keys: 1_000_000}, true, true, true},
		{"idle, small queue", sweep{seq: 3, minLive: live(1)}, true, true, true},
	}
	for _, tc := range tests {
		start, exact := tc.s.due(tc.idle)
		if start != tc.start || exact != tc.exact {
			t.Errorf("%s: due %v exact %v, want %v %v", tc.name, start, exact, tc.start, tc.exact)
		}
	}
}

// TestMigrateFromSchema1 upgrades a file jobq schema 1 made (its CLI) and
// uses it: the unique index is gone, every queued task's ID still
// deduplicates (in flight and delayed ones too), the completed task's ID
// can be pushed again, the lease the older process held still settles,
// and every task comes back whole.
func TestMigrateFromSchema1(t *testing.T) {
	t.Parallel()
	path := loadDump(t, "schema1.sql")
	const inFlightLease = "16707b12b6d58983ea242c89" // in the dump
	const doneID = "237ed259586f82ede7fc9d0f4b7f49a3"
	ctx := t.Context()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// As a schema 1 push stores an ID that is not canonical.
	if _, err := raw.ExecContext(ctx, `INSERT INTO jobq_messages (queue, task_id, body, id_at, visible_at, enqueued_at)
		VALUES ('q', 'custom-id', '{"id": "custom-id"}', 0, 0, 1795701238687181)`); err != nil {
		t.Fatal(err)
	}
	d := openAt(t, path, "queue=q")
	var version, index int
	if err := raw.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version),
		(SELECT COUNT(*) FROM sqlite_master WHERE name = 'jobq_messages_task')`).Scan(&version, &index); err != nil {
		t.Fatal(err)
	}
	if version != schemaVersion || index != 0 {
		t.Errorf("user_version %d, unique index %d; want %d, dropped", version, index, schemaVersion)
	}
	peeked, err := d.Peek(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	queued := map[string]string{} // ID → command, as the body holds it
	for _, p := range peeked {
		queued[p.ID] = command(t, p.ID, p.Body)
	}
	if got := slices.Sorted(maps.Values(queued)); fmt.Sprint(got) != "[ echo later echo prio echo ready sleep 100]" {
		t.Fatalf("queued after the upgrade: %q", got)
	}
	if got := keyRows(t, d); len(got) != len(queued) {
		t.Errorf("keys after the upgrade: %v, want one per queued task", got)
	}
	for id := range queued {
		if r, err := d.Push(ctx, []*driver.Message{{ID: id, Body: []byte("again")}}); err != nil || !r[0].Duplicate {
			t.Errorf("push of %s again after the upgrade: %+v, %v; want a duplicate", id, r, err)
		}
	}
	if r, err := d.Push(ctx, []*driver.Message{{ID: doneID, Body: []byte(`{"id": "` + doneID + `"}`)}}); err != nil || r[0].Duplicate {
		t.Errorf("push of the completed task's ID: %+v, %v; want it queued", r, err)
	}
	if errs := d.Complete(ctx, driver.Completions(driver.Lease{MessageID: "1", Token: inFlightLease})); errs != nil {
		t.Errorf("complete with the lease taken before the upgrade: %v", errs[0])
	}
	if n, err := d.RequeueDead(ctx, nil); err != nil || n != 1 {
		t.Fatalf("requeue dead: %d, %v", n, err)
	}
	got := map[string]string{}
	for {
		recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if got[r.ID] != "" {
				t.Errorf("%s received twice", r.ID)
			}
			got[r.ID] = command(t, r.ID, r.Body)
			if errs := d.Complete(ctx, driver.Completions(r.Lease)); errs != nil {
				t.Fatal(errs[0])
			}
		}
	}
	if got, want := slices.Sorted(maps.Values(got)), "[ echo prio echo ready exit 1 {\"id\": \""+doneID+"\"}]"; fmt.Sprint(got) != want {
		t.Errorf("received after the upgrade: %q, want %s", got, want)
	}
}

// command is the shell command in a CLI task's body, "" for another
// body; the body must carry its ID.
func command(t *testing.T, id string, body []byte) string {
	t.Helper()
	if !bytes.Contains(body, []byte(id)) {
		t.Errorf("body of %s lacks its ID: %s", id, body)
	}
	var task struct {
		Kwargs string `json:"kwargs"`
	}
	if json.Unmarshal(body, &task) != nil || task.Kwargs == "" {
		if strings.HasPrefix(string(body), `{"id"`) && id != "custom-id" {
			return string(body)
		}
		return ""
	}
	var kw struct {
		Cmd string `json:"cmd"`
	}
	if err := json.Unmarshal([]byte(task.Kwargs), &kw); err != nil {
		t.Fatalf("kwargs of %s: %v", id, err)
	}
	return kw.Cmd
}
