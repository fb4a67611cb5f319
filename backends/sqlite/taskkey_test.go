package sqlite

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// canon is a canonical task ID (32 lowercase hex digits) for n.
func canon(n int) string { return fmt.Sprintf("%032x", n) }

func TestStoreTaskRoundTrip(t *testing.T) {
	t.Parallel()
	id := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name   string
		id     string
		body   string
		cut    bool // the ID's digits are cut out of the stored body
		binary bool // the key is 16 bytes
	}{
		{"ai4s wire JSON", id, `{"kwargs": "x", "id": "` + id + `"}`, true, true},
		{"ID at the start", id, id + ` tail`, true, true},
		{"ID at the end", id, `head ` + id, true, true},
		{"body is the ID", id, id, true, true},
		{"ID twice", id, id + id, true, true},
		{"ID not in the body", id, `{"id": "other"}`, false, true},
		{"empty body", id, ``, false, true},
		{"upper-case hex", strings.ToUpper(id), `{"id": "` + strings.ToUpper(id) + `"}`, false, false},
		{"31 digits", id[:31], `{"id": "` + id[:31] + `"}`, false, false},
		{"33 digits", id + "0", `{"id": "` + id + `0"}`, false, false},
		{"not hex", "0123456789abcdef0123456789abcdeg", `x`, false, false},
		{"custom", "frame-1", `{"id": "frame-1"}`, false, false},
		{"empty ID", "", `{}`, false, false},
		{"binary body", id, "\x00\xff" + id + "\xfe", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := storeTask(tc.id, []byte(tc.body))
			if _, ok := st.key.([]byte); ok != tc.binary {
				t.Errorf("key %#v: binary %v, want %v", st.key, ok, tc.binary)
			}
			if cut := st.idAt > 0; cut != tc.cut || (cut && len(st.body) != len(tc.body)-32) {
				t.Errorf("stored body %q id_at %d: cut %v, want %v", st.body, st.idAt, cut, tc.cut)
			}
			var key any = st.key
			if s, ok := key.(string); ok {
				key = s // as SQLite returns TEXT
			}
			gotID, gotBody, why := loadTask(key, st.body, st.idAt)
			if why != "" || gotID != tc.id || string(gotBody) != tc.body {
				t.Errorf("loaded %q %q (%s), want %q %q", gotID, gotBody, why, tc.id, tc.body)
			}
		})
	}
}

func TestLoadTaskDamaged(t *testing.T) {
	t.Parallel()
	key := taskKey(canon(7))
	tests := []struct {
		name            string
		key, body, idAt any
		wantWhy         string
	}{
		{"id_at past the body", key, []byte("ab"), int64(4), "does not fit"},
		{"negative id_at", key, []byte("ab"), int64(-1), "does not fit"},
		{"id_at with a text ID", "frame-1", []byte("ab"), int64(1), "does not fit"},
		{"id_at text", key, []byte("ab"), "one", "not an integer"},
		{"body NULL", key, nil, int64(0), "not bytes"},
		{"id_at NULL (written before schema 1)", key, []byte("ab"), nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, why := loadTask(tc.key, tc.body, tc.idAt)
			if tc.wantWhy == "" && why != "" || !strings.Contains(why, tc.wantWhy) {
				t.Errorf("why %q, want %q", why, tc.wantWhy)
			}
		})
	}
}

// TestKeySQLAgreesWithGo: the SQL that copies and converts task IDs gives
// the keys taskKey gives.
func TestKeySQLAgreesWithGo(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	ids := []string{canon(1), strings.ToUpper(canon(10)), canon(1)[:31], canon(1) + "0", "frame-1", "", "0123456789abcdef0123456789abcdeg", "ü" + canon(1)[2:]}
	for _, id := range ids {
		var got any
		if err := b.drv.db.QueryRowContext(b.ctx, `SELECT `+strings.ReplaceAll(keyColumnSQL, "task_id", "?1"), id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		want := taskKey(id)
		if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", want, want) {
			t.Errorf("%q: SQL key %#v, Go key %#v", id, got, want)
		}
	}
}

// loadSchema0 writes testdata/schema0.sql (a file made before schema 1)
// into a new file and returns its path.
func loadSchema0(t *testing.T) string {
	t.Helper()
	return loadDump(t, "schema0.sql")
}

// loadDump writes the SQL dump testdata/name into a new file and returns
// its path.
func loadDump(t *testing.T, name string) string {
	t.Helper()
	dump, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), string(dump)); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMigrateFromSchema0 upgrades a file an older jobq made, with messages
// in every state, and uses it: nothing is lost or changed, dedup holds
// between the old rows and new pushes, and the lease an older process
// held can still be settled.
func TestMigrateFromSchema0(t *testing.T) {
	t.Parallel()
	path := loadSchema0(t)
	const inFlightLease = "c286ddbfdbb738c8012e17efaa9d991c" // in the dump
	ctx := t.Context()
	// A message far enough on that the conversion reaches it in a later
	// statement than the others (convertStep), delayed like ...05.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `INSERT INTO jobq_messages (id, queue, task_id, body, visible_at, enqueued_at)
		VALUES (?, 'q', ?, x'00', 4102444800000000, 1795691194745596)`, 3*convertStep, canon(6)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	d := openAt(t, path, "queue=q")

	var version int
	if err := d.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != schemaVersion {
		t.Errorf("user_version %d, want %d", version, schemaVersion)
	}
	peeked, err := d.Peek(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		canon(2):                           `{"version": 1, "kwargs": "inflight", "id": "` + canon(2) + `"}`,
		canon(3):                           `{"version": 1, "kwargs": "ready", "id": "` + canon(3) + `"}`,
		"custom-id":                        `{"id": "custom-id"}`,
		"0123456789ABCDEF0123456789ABCDEF": `upper`,
		canon(4):                           `not json, no id`,
		canon(5):                           `{"id": "` + canon(5) + `"}`,
		canon(6):                           "\x00",
	}
	got := map[string]string{}
	for _, p := range peeked {
		got[p.ID] = string(p.Body)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("peek after the upgrade:\n got %v\nwant %v", got, want)
	}

	// Every old task ID still deduplicates, in flight and delayed ones too.
	var again []*driver.Message
	for id := range want {
		again = append(again, &driver.Message{ID: id, Body: []byte(`{"id": "` + id + `"}`)})
	}
	res, err := d.Push(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Duplicate {
			t.Errorf("push of %s again after the upgrade was not deduplicated", again[i].ID)
		}
	}

	// The older process's lease is still good.
	if errs := d.Complete(ctx, driver.Completions(driver.Lease{MessageID: "2", Token: inFlightLease})); errs != nil {
		t.Errorf("complete with the lease taken before the upgrade: %v", errs[0])
	}
	// The dead letter comes back whole, and its ID deduplicates.
	if n, err := d.RequeueDead(ctx, nil); err != nil || n != 1 {
		t.Fatalf("requeue dead: %d, %v", n, err)
	}
	if res, err := d.Push(ctx, []*driver.Message{{ID: canon(1), Body: []byte("x")}}); err != nil || !res[0].Duplicate {
		t.Errorf("push of the revived dead letter's ID: %+v, %v; want a duplicate", res, err)
	}
	if removed, _, err := d.RemoveTasks(ctx, []*driver.ResultRecord{rec("custom-id", driver.ResultCancelled, time.Hour)}, nil); err != nil || len(removed) != 1 {
		t.Errorf("remove custom-id: %v, %v", removed, err)
	}
	got = map[string]string{}
	for {
		recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			got[r.ID] = string(r.Body)
			if errs := d.Complete(ctx, driver.Completions(r.Lease)); errs != nil {
				t.Fatal(errs[0])
			}
		}
	}
	want = map[string]string{
		canon(1):                           `{"version": 1, "kwargs": "dead", "id": "` + canon(1) + `"}`,
		canon(3):                           `{"version": 1, "kwargs": "ready", "id": "` + canon(3) + `"}`,
		"0123456789ABCDEF0123456789ABCDEF": `upper`,
		canon(4):                           `not json, no id`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("received after the upgrade:\n got %v\nwant %v", got, want)
	}

	// Opening the upgraded file again changes nothing.
	d2 := openAt(t, path, "queue=q")
	if s, err := d2.Stats(ctx); err != nil || s.Delayed != 2 || s.Ready != 0 {
		t.Errorf("stats on reopening: %+v, %v; want the two delayed messages alone", s, err)
	}
}

// TestOlderVersionFenced: the writes an older jobq makes fail on an
// upgraded file, with fenceMessage where a trigger can stop them, changing
// nothing.
func TestOlderVersionFenced(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=q")
	id := canon(9)
	b.push(t, &driver.Message{ID: id, Body: []byte(`{"id": "` + id + `"}`)})
	const noIndex = "ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE constraint"
	claim := `UPDATE jobq_messages SET lease = ?, visible_at = ?, deliveries = deliveries + 1
		WHERE id IN (SELECT id FROM jobq_messages WHERE queue = 'q' AND visible_at <= ? LIMIT 1) RETURNING id, task_id, body`
	tests := []struct {
		name, query string
		args        []any
		want        string
	}{
		// As a push before schema 1 wrote it: no id_at.
		{"push before schema 1", `INSERT INTO jobq_messages (queue, task_id, body, priority, visible_at, enqueued_at, concurrency_key, rate_key, trace_parent)
			VALUES ('q', ?, x'00', 0, 0, 0, '', '', '') ON CONFLICT (queue, task_id) WHERE task_id <> '' DO NOTHING RETURNING id`, []any{canon(10)}, noIndex},
		// As schema 1 wrote it (push.go of commit 9e0d933).
		{"push of schema 1", `INSERT INTO jobq_messages (queue, task_id, body, id_at, priority, visible_at, enqueued_at, concurrency_key, rate_key, trace_parent)
			VALUES ('q', ?, x'00', 0, 0, 0, 0, '', '', '') ON CONFLICT (queue, task_id) WHERE task_id <> '' DO NOTHING RETURNING id`, []any{taskKey(canon(10))}, noIndex},
		// As an insert of another tool that leaves id_at out.
		{"insert without id_at", `INSERT INTO jobq_messages (queue, task_id, body, visible_at, enqueued_at) VALUES ('q', ?, x'00', 0, 0)`,
			[]any{canon(10)}, fenceMessage},
		// As a claim before schema 1 wrote it: a 32-digit token.
		{"claim before schema 1", claim, []any{canon(11), micros(time.Now().Add(time.Minute)), micros(time.Now())}, fenceMessage},
		// As a claim of schema 1: a 24-digit token.
		{"claim of schema 1", claim, []any{canon(11)[:24], micros(time.Now().Add(time.Minute)), micros(time.Now())}, fenceMessage},
		// As a claim of schema 2: a 26-digit token.
		{"claim of schema 2", claim, []any{canon(11)[:26], micros(time.Now().Add(time.Minute)), micros(time.Now())}, fenceMessage},
		// As a record of schema 2 (results.go of commit 2a738eb).
		{"record of schema 2", `INSERT INTO jobq_results (queue, task_id, state, updated_at, expires_at, data) VALUES ('q', ?, 'succeeded', 0, 0, x'')
			ON CONFLICT (queue, task_id) DO UPDATE SET state = excluded.state`, []any{canon(12)}, noIndex},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := b.drv.db.QueryContext(b.ctx, tc.query, tc.args...)
			if err == nil {
				for rows.Next() {
				}
				err = rows.Err()
				rows.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	got := b.receive(t, 10, time.Minute)
	if len(got) != 1 || got[0].ID != id || !bytes.Contains(got[0].Body, []byte(id)) {
		t.Errorf("after the fenced writes: %+v, want the one message as pushed", got)
	}
}

// TestNewerSchemaRefused: a file a newer jobq upgraded is refused whole,
// by the read commands' read-only open too.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	if _, err := b.drv.db.ExecContext(b.ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	for _, readOnly := range []bool{false, true} {
		d, err := New(b.ctx, b.path, Options{ReadOnly: readOnly})
		if err == nil {
			d.Close()
			t.Fatalf("open (read-only %v) of a newer file succeeded; want it refused", readOnly)
		}
		wantCode(t, err, errcode.FailedPrecondition)
		if !strings.Contains(err.Error(), "newer jobq") {
			t.Errorf("open (read-only %v): error %q does not say why", readOnly, err)
		}
	}
}

// TestCompactStorage: a canonical ID found in the body is stored once, as
// 16 bytes, and the body comes back whole through every read.
func TestCompactStorage(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=q")
	id := canon(12)
	body := []byte(`{"version": 1, "id": "` + id + `"}`)
	b.push(t, &driver.Message{ID: id, Body: body})
	var keyLen, bodyLen, idAt int64
	if err := b.drv.db.QueryRowContext(b.ctx, `SELECT length(task_id), length(body), id_at FROM jobq_messages`).Scan(&keyLen, &bodyLen, &idAt); err != nil {
		t.Fatal(err)
	}
	if keyLen != 16 || bodyLen != int64(len(body)-32) || idAt == 0 {
		t.Errorf("stored key %d bytes, body %d bytes, id_at %d; want 16, %d, the offset", keyLen, bodyLen, idAt, len(body)-32)
	}
	got := b.receive(t, 1, time.Minute)
	if len(got) != 1 || got[0].ID != id || !bytes.Equal(got[0].Body, body) {
		t.Fatalf("received %+v", got)
	}
	if errs := b.drv.DeadLetter(b.ctx, []driver.DeadLetterParams{{Lease: got[0].Lease, Reason: "r"}}); errs != nil {
		t.Fatal(errs[0])
	}
	dead, err := b.drv.ListDead(b.ctx, 0)
	if err != nil || len(dead) != 1 || dead[0].ID != id || !bytes.Equal(dead[0].Body, body) {
		t.Fatalf("dead letters %+v, %v", dead, err)
	}
	if n, err := b.drv.RequeueDead(b.ctx, nil); err != nil || n != 1 {
		t.Fatalf("requeue dead: %d, %v", n, err)
	}
	peeked, err := b.drv.Peek(b.ctx, 1)
	if err != nil || len(peeked) != 1 || peeked[0].ID != id || !bytes.Equal(peeked[0].Body, body) {
		t.Fatalf("peek %+v, %v", peeked, err)
	}
	if removed, _, err := b.drv.RemoveTasks(b.ctx, []*driver.ResultRecord{rec(id, driver.ResultCancelled, time.Hour)}, nil); err != nil || len(removed) != 1 || removed[0] != id {
		t.Fatalf("remove: %v, %v", removed, err)
	}
}

// TestReadsOfAnOlderFileSayHowToUpgradeIt: a read-only open converts
// nothing, so a read needing a newer layout's columns on a file an older
// release made fails FailedPrecondition saying that a push or worker of
// this release upgrades it, not with SQLite's bare "no such column".
func TestReadsOfAnOlderFileSayHowToUpgradeIt(t *testing.T) {
	t.Parallel()
	path := loadSchema0(t)
	ctx := t.Context()
	d, err := New(ctx, path, Options{Queue: "q", ReadOnly: true})
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
		const want = "no push or worker of this one has upgraded it yet"
		if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), want) {
			t.Errorf("%s of a schema-0 file: %v (code %v); want FailedPrecondition saying %q", tc.name, err, errcode.Of(err), want)
		}
	}
}
