package sqlite

import (
	"bytes"
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestTaskKeyRoundTripAllPaths pushes task IDs and bodies whose storage
// (taskkey.go) has an edge and checks that each comes back byte for byte
// from every path that reads a message: peek, claim, a requeue, the dead
// letters and their requeue; that each ID deduplicates while its message
// is queued, in flight or revived; and that cancel finds each one.
func TestTaskKeyRoundTripAllPaths(t *testing.T) {
	t.Parallel()
	id := func(n int) string { return canon(n) }
	env := func(n int, kwargs string) string {
		return `{"version": 1, "reply_requested": false, "kwargs": ` + kwargs + `, "num_retries": 0, "id": "` + id(n) + `"}`
	}
	tests := []struct{ id, body string }{
		{id(1), env(1, `"{}"`)},
		{id(2), env(2, `"{\"parent\": \"`+id(2)+`\"}"`)},               // the ID in the kwargs, before its own
		{id(3), id(3) + id(3) + " " + id(3)},                           // three times, back to back
		{id(4), env(5, `"{}"`)},                                        // another canonical ID in the body
		{id(6), `{"kwargs": "日本語 ✓ \"q\" \\", "id": "` + id(6) + `"}`}, // non-ASCII, escaped quotes
		{id(7), `no ID here`},
		{id(8), ``},
		{id(9), id(9)[:31]}, // 31 of its digits
		{strings.ToUpper(id(10)), `{"id": "` + strings.ToUpper(id(10)) + `"}`},
		{strings.ToUpper(id(11)), `{"id": "` + id(11) + `"}`}, // the lowercase spelling in the body
		{"frame-1", `{"id": "frame-1"}`},
		{"0123456789abcdef", `{"id": "0123456789abcdef"}`}, // 16 characters, as long as a key
		{"\x00\xff", "\x00\xff"},
		{"", `{"id": ""}`},
		{id(12), "\xff" + id(12) + "\x00" + strings.Repeat("x", 1<<20)},
	}
	b := setup(t, "queue=q")
	d, ctx := b.drv, b.ctx
	var msgs []*driver.Message
	want := map[string][]byte{} // message ID -> body
	for _, tt := range tests {
		msgs = append(msgs, &driver.Message{ID: tt.id, Body: []byte(tt.body)})
	}
	for i, r := range b.push(t, msgs...) {
		if r.Duplicate {
			t.Fatalf("push of %q reported a duplicate", msgs[i].ID)
		}
		want[r.MessageID] = msgs[i].Body
	}
	check := func(what, mid, taskID string, got []byte) {
		t.Helper()
		w, ok := want[mid]
		if !ok || !bytes.Equal(got, w) {
			t.Errorf("%s of message %s (task %q): body %.80q (%d bytes); want %.80q (%d bytes)", what, mid, taskID, got, len(got), w, len(w))
		}
	}
	dedup := func(when string) {
		t.Helper()
		var again []*driver.Message
		for _, m := range msgs {
			if m.ID != "" {
				again = append(again, &driver.Message{ID: m.ID, Body: []byte("again")})
			}
		}
		res, err := d.Push(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !r.Duplicate {
				t.Errorf("%s: push of %q again was not deduplicated", when, again[i].ID)
			}
		}
	}

	peeked, err := d.Peek(ctx, 100)
	if err != nil || len(peeked) != len(msgs) {
		t.Fatalf("peek: %d, %v; want %d", len(peeked), err, len(msgs))
	}
	for _, p := range peeked {
		check("peek", p.MessageID, p.ID, p.Body)
	}
	dedup("queued")
	recs := b.receive(t, 100, time.Minute)
	if len(recs) != len(msgs) {
		t.Fatalf("received %d; want %d", len(recs), len(msgs))
	}
	dedup("in flight")
	var requeue []driver.RequeueParams
	var dead []driver.DeadLetterParams
	for i, r := range recs {
		check("claim", r.Lease.MessageID, r.ID, r.Body)
		if i%2 == 0 {
			requeue = append(requeue, driver.RequeueParams{Lease: r.Lease})
		} else {
			dead = append(dead, driver.DeadLetterParams{Lease: r.Lease, Reason: "r"})
		}
	}
	if errs := d.Requeue(ctx, requeue); errs != nil {
		t.Fatalf("requeue: %v", errs)
	}
	if errs := d.DeadLetter(ctx, dead); errs != nil {
		t.Fatalf("dead letter: %v", errs)
	}
	letters, err := d.ListDead(ctx, 100)
	if err != nil || len(letters) != len(dead) {
		t.Fatalf("dead letters: %d, %v; want %d", len(letters), err, len(dead))
	}
	byTask := map[string][]byte{} // dead letters and revived ones have new message IDs
	for _, m := range msgs {
		byTask[m.ID] = m.Body
	}
	for _, l := range letters {
		if !bytes.Equal(l.Body, byTask[l.ID]) {
			t.Errorf("dead letter of task %q: body %.80q; want %.80q", l.ID, l.Body, byTask[l.ID])
		}
	}
	if n, err := d.RequeueDead(ctx, nil); err != nil || int(n) != len(dead) {
		t.Fatalf("requeue dead: %d, %v; want %d", n, err, len(dead))
	}
	dedup("revived")
	peeked, err = d.Peek(ctx, 100)
	if err != nil || len(peeked) != len(msgs) {
		t.Fatalf("peek after requeues: %d, %v; want %d", len(peeked), err, len(msgs))
	}
	var cancel []*driver.ResultRecord
	for _, p := range peeked {
		if !bytes.Equal(p.Body, byTask[p.ID]) {
			t.Errorf("peek after requeues of task %q: body %.80q; want %.80q", p.ID, p.Body, byTask[p.ID])
		}
		if p.ID != "" {
			cancel = append(cancel, rec(p.ID, driver.ResultCancelled, time.Hour))
		}
	}
	removed, _, err := d.RemoveTasks(ctx, cancel, nil)
	if err != nil || len(removed) != len(cancel) {
		t.Fatalf("cancel: removed %q, %v; want all %d", removed, err, len(cancel))
	}
	if s := b.stats(t); s.Ready != 1 {
		t.Errorf("after cancelling every task with an ID, stats %+v; want the one without", s)
	}
}

// TestInterruptedUpgrade: an upgrade to schema 1 that stops part way
// through converting the rows (here a statement fails in a later step;
// a crash is the same to SQLite) leaves the file as it was, schema 0, and
// the next open upgrades it whole.
func TestInterruptedUpgrade(t *testing.T) {
	t.Parallel()
	path := loadSchema0(t)
	ctx := t.Context()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(ctx, `INSERT INTO jobq_messages (id, queue, task_id, body, visible_at, enqueued_at)
		VALUES (?, 'q', ?, 'late', 0, 1795691194745596)`, 3*convertStep, canon(6)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `CREATE TRIGGER stop_upgrade BEFORE UPDATE OF task_id ON jobq_messages
		WHEN OLD.id >= 20000 BEGIN SELECT RAISE(ABORT, 'stopped part way'); END`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse("sqlite://" + path + "?queue=q")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := (URLOpener{}).Open(ctx, u, driver.OpenOptions{}); err == nil {
		_ = d.Close()
		t.Fatal("open went through the stopped upgrade")
	}
	var version, idAt, blobs int
	if err := raw.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version),
		(SELECT COUNT(*) FROM pragma_table_info('jobq_messages') WHERE name = 'id_at'),
		(SELECT COUNT(*) FROM jobq_messages WHERE typeof(task_id) = 'blob')`).Scan(&version, &idAt, &blobs); err != nil {
		t.Fatal(err)
	}
	if version != 0 || idAt != 0 || blobs != 0 {
		t.Fatalf("after the stopped upgrade: user_version %d, id_at columns %d, converted keys %d; want the file unchanged", version, idAt, blobs)
	}
	if _, err := raw.ExecContext(ctx, `DROP TRIGGER stop_upgrade`); err != nil {
		t.Fatal(err)
	}
	d := openAt(t, path, "queue=q")
	var text int
	if err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobq_messages WHERE `+canonicalSQL("task_id")).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if text != 0 {
		t.Errorf("after the next open, %d canonical IDs still stored as text", text)
	}
	res, err := d.Push(ctx, []*driver.Message{{ID: canon(6), Body: []byte("again")}})
	if err != nil || !res[0].Duplicate {
		t.Errorf("push of the late row's ID after the upgrade: %+v, %v; want a duplicate", res, err)
	}
	removed, _, err := d.RemoveTasks(ctx, []*driver.ResultRecord{rec(canon(6), driver.ResultCancelled, time.Hour)}, nil)
	if err != nil || len(removed) != 1 {
		t.Errorf("cancel of the late row's ID after the upgrade: %q, %v; want it removed", removed, err)
	}
}
