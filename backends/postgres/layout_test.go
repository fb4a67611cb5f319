package postgres

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func TestTaskKey(t *testing.T) {
	t.Parallel()
	canon := "2adbe2df93a2d35c95189a587675abde"
	sixteen := "0123456789abcdef"
	tests := []struct {
		id  string
		key []byte
	}{
		{"", nil},
		{canon, mustHex(t, canon)},
		{sixteen, []byte(sixteen + "\x00")},
		{hex.EncodeToString([]byte(sixteen)), []byte(sixteen)},
		{strings.ToUpper(canon), []byte(strings.ToUpper(canon))},
		{"fifteen-bytes..", []byte("fifteen-bytes..")},
		{"seventeen-bytes..", []byte("seventeen-bytes..")},
		{"日本語", []byte("日本語")},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		key := taskKey(tt.id)
		if !bytes.Equal(key, tt.key) || (key == nil) != (tt.key == nil) {
			t.Errorf("taskKey(%q) = %q; want %q", tt.id, key, tt.key)
		}
		if got := taskIDOf(key); got != tt.id {
			t.Errorf("taskIDOf(taskKey(%q)) = %q", tt.id, got)
		}
		if other, dup := seen[string(key)]; dup {
			t.Errorf("task IDs %q and %q have the same key %q", other, tt.id, key)
		}
		seen[string(key)] = tt.id
	}
	for _, id := range []string{"a\x00b", "\xff"} {
		if err := checkTaskID(id); errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("checkTaskID(%q) = %v; want InvalidArgument", id, err)
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// envelope is an ai4s-jobq v1 body for task id.
func envelope(n int, id string) []byte {
	return fmt.Appendf(nil, `{"version": 1, "reply_requested": false, "kwargs": "{\"n\": %d}", "num_retries": 0, "id": "%s"}`, n, id)
}

// layoutShapes are task IDs and bodies whose storage has an edge: a
// 16-character ID beside the canonical ID whose 16 bytes it spells, IDs
// that look canonical but are not, no ID, bodies that are not envelopes
// (one starting with a header letter), a body larger than a page.
func layoutShapes() []*driver.Message {
	canon := "2adbe2df93a2d35c95189a587675abde"
	sixteen := "0123456789abcdef"
	spelled := hex.EncodeToString([]byte(sixteen))
	return []*driver.Message{
		{ID: canon, Body: envelope(1, canon)},
		{ID: sixteen, Body: envelope(2, sixteen)},
		{ID: spelled, Body: envelope(3, spelled)},
		{ID: strings.ToUpper(canon), Body: envelope(4, strings.ToUpper(canon))},
		{ID: "own \"quoted\" id", Body: []byte(`{"version": 2, "reply_requested": true, "kwargs": "{}", "id": "own \"quoted\" id"}`)},
		{ID: "", Body: []byte("no ID")},
		{ID: "binary", Body: []byte{'f', 0, 0xff, '"', '}'}},
		{ID: "big", Body: bytes.Repeat([]byte("x"), 200_000)},
	}
}

// TestPackedStorage pushes every shape and reads it back byte for byte
// through peek, claim, dead letters and their requeue, and checks that an
// envelope is stored packed and that no two IDs share a key.
func TestPackedStorage(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	msgs := layoutShapes()
	res, err := d.Push(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Duplicate {
			t.Fatalf("push of %q reported a duplicate", msgs[i].ID)
		}
	}
	var stored int
	if err := d.pool.QueryRow(ctx, `SELECT octet_length(packed_body) FROM `+d.sql.messagesTable+` WHERE queue = $1 AND task_key = $2`,
		d.cfg.queue, taskKey(msgs[0].ID)).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored > 20 {
		t.Errorf("a %d-byte envelope is stored in %d bytes; want it packed", len(msgs[0].Body), stored)
	}
	peeked, err := d.Peek(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	checkShapes(t, "peek", msgs, asMessages(peeked, func(m *driver.PeekedMessage) (string, []byte) { return m.ID, m.Body }))
	got := receive(t, d, len(msgs), time.Minute)
	checkShapes(t, "receive", msgs, asMessages(got, func(m *driver.Received) (string, []byte) { return m.ID, m.Body }))
	reqs := make([]driver.DeadLetterParams, len(got))
	for i, m := range got {
		reqs[i] = driver.DeadLetterParams{Lease: m.Lease, Reason: "test"}
	}
	if errs := d.DeadLetter(ctx, reqs); errs != nil {
		t.Fatal(errs)
	}
	dead, err := d.ListDead(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	checkShapes(t, "list dead", msgs, asMessages(dead, func(m *driver.DeadMessage) (string, []byte) { return m.ID, m.Body }))
	if n, err := d.RequeueDead(ctx, nil); err != nil || n != int64(len(msgs)) {
		t.Fatalf("requeue dead = %d, %v", n, err)
	}
	again := receive(t, d, len(msgs), time.Minute)
	checkShapes(t, "receive after requeue", msgs, asMessages(again, func(m *driver.Received) (string, []byte) { return m.ID, m.Body }))
}

// asMessages is what an operation read, as task IDs and bodies.
func asMessages[T any](read []T, f func(T) (string, []byte)) []*driver.Message {
	out := make([]*driver.Message, len(read))
	for i, r := range read {
		out[i] = &driver.Message{}
		out[i].ID, out[i].Body = f(r)
	}
	return out
}

// checkShapes compares the messages an operation read with those pushed,
// by task ID and body.
func checkShapes(t *testing.T, op string, want, read []*driver.Message) {
	t.Helper()
	left := map[string][]byte{}
	for _, m := range want {
		left[m.ID] = m.Body
	}
	for _, m := range read {
		id, body := m.ID, m.Body
		w, ok := left[id]
		if !ok {
			t.Errorf("%s: task ID %q was not pushed (or came twice)", op, id)
			continue
		}
		if !bytes.Equal(body, w) {
			t.Errorf("%s: task %q has body %.80q; want %.80q", op, id, body, w)
		}
		delete(left, id)
	}
	if len(left) > 0 {
		t.Errorf("%s: %d of %d messages missing", op, len(left), len(want))
	}
}

// TestPackedLayoutUpgrade migrates a schema at step 10 holding messages of
// every shape (queued, delayed, in flight, dead), granted to a role and
// with a storage parameter of the user's: everything is then served byte
// for byte, dedup still meets the old task IDs, the lease held across the
// migration still settles, ids go on from where they were, and the grant
// and parameter are kept. The statements of the release before then fail,
// changing nothing.
func TestPackedLayoutUpgrade(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	s := pgx.Identifier{schema}.Sanitize()
	if err := migrateSteps(ctx, pool, schema, migrations[:10]); err != nil {
		t.Fatal(err)
	}
	const queue = "old"
	msgs := layoutShapes()
	var lastID int64
	for i, m := range msgs {
		if err := pool.QueryRow(ctx, `INSERT INTO `+s+`.messages (queue, task_id, body, priority, visible_at) VALUES ($1, NULLIF($2, ''), $3, $4,
			now() + CASE WHEN $4 < 0 THEN interval '1 hour' ELSE interval '0' END) RETURNING id`, queue, m.ID, m.Body, i%3-1).Scan(&lastID); err != nil {
			t.Fatal(err)
		}
	}
	// One in flight, with a lease as a claim of the release before took it.
	var flightID int64
	var flightLease string
	var flightPrio int32
	if err := pool.QueryRow(ctx, `INSERT INTO `+s+`.messages (queue, task_id, body, lease, visible_at, deliveries)
		VALUES ($1, 'in-flight', 'held', gen_random_uuid(), now() + interval '1 hour', 1) RETURNING id, lease::text, priority`, queue).Scan(&flightID, &flightLease, &flightPrio); err != nil {
		t.Fatal(err)
	}
	deadCanon := "ffeeddccbbaa99887766554433221100"
	deadBody := envelope(9, deadCanon)
	if _, err := pool.Exec(ctx, `INSERT INTO `+s+`.dead_letters (id, queue, task_id, body, priority, enqueued_at, deliveries, reason, detail)
		VALUES (nextval(pg_get_serial_sequence('`+s+`.messages', 'id')), $1, $2, $3, 0, now(), 3, 'failed', 'detail')`, queue, deadCanon, deadBody); err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("pgpack_upgrade_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, `CREATE ROLE `+role+` NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Exec(ctx, `DROP OWNED BY `+role)
		pool.Exec(ctx, `DROP ROLE `+role)
	})
	if _, err := pool.Exec(ctx, `GRANT SELECT, INSERT, UPDATE, DELETE ON `+s+`.messages TO `+role+`;
		ALTER TABLE `+s+`.messages SET (autovacuum_vacuum_cost_delay = 1)`); err != nil {
		t.Fatal(err)
	}

	d := openDriver(t, "schema="+schema, "queue="+queue)
	var version int
	var insertable bool
	var options []string
	if err := pool.QueryRow(ctx, `SELECT (SELECT max(version) FROM `+s+`.schema_migrations), has_table_privilege($1, $2, 'INSERT'),
		(SELECT reloptions FROM pg_class WHERE oid = $2::regclass)`, role, s+".messages").Scan(&version, &insertable, &options); err != nil {
		t.Fatal(err)
	}
	if version != SchemaVersion || !insertable || !slices.Contains(options, "autovacuum_vacuum_cost_delay=1") || !slices.Contains(options, "fillfactor=50") {
		t.Errorf("after the migration: version %d, role may insert %v, storage parameters %v; want %d, true, the user's and fillfactor=50",
			version, insertable, options, SchemaVersion)
	}

	t.Run("older release fails", func(t *testing.T) { olderReleaseFails(t, pool, s, queue) })

	all := append(slices.Clone(msgs), &driver.Message{ID: "in-flight", Body: []byte("held")})
	peeked, err := d.Peek(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	checkShapes(t, "peek", all, asMessages(peeked, func(m *driver.PeekedMessage) (string, []byte) { return m.ID, m.Body }))
	// Pushed again, every task is a duplicate of the message it was.
	again := make([]*driver.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.ID != "" {
			again = append(again, &driver.Message{ID: m.ID, Body: []byte("new")})
		}
	}
	res, err := d.Push(ctx, append(again, &driver.Message{ID: "fresh", Body: []byte("new")}))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:len(again)] {
		if !r.Duplicate || r.MessageID == "" {
			t.Errorf("task %q pushed again: %+v; want a duplicate of its message", again[i].ID, r)
		}
	}
	if id, _ := strconv.ParseInt(res[len(again)].MessageID, 10, 64); id <= lastID+2 {
		t.Errorf("a message pushed after the migration got id %d; want one above the %d taken before", id, lastID+2)
	}
	held := driver.Lease{MessageID: strconv.FormatInt(flightID, 10), Token: leaseToken(flightLease, flightPrio)}
	if errs := d.Complete(ctx, driver.Completions(held)); errs != nil {
		t.Errorf("completing a lease taken before the migration: %v", errs)
	}
	if _, err := d.pool.Exec(ctx, `UPDATE `+d.sql.messagesTable+` SET visible_at = now() WHERE queue = $1`, queue); err != nil {
		t.Fatal(err)
	}
	got := receive(t, d, len(msgs)+1, time.Minute)
	checkShapes(t, "receive", append(slices.Clone(msgs), &driver.Message{ID: "fresh", Body: []byte("new")}), asMessages(got, func(m *driver.Received) (string, []byte) { return m.ID, m.Body }))
	dead, err := d.ListDead(ctx, 10)
	if err != nil || len(dead) != 1 || dead[0].ID != deadCanon || !bytes.Equal(dead[0].Body, deadBody) || dead[0].Reason != "failed" || dead[0].DeliveryCount != 3 {
		t.Fatalf("dead letters after the migration: %+v, %v", dead, err)
	}
	if n, err := d.RequeueDead(ctx, nil); err != nil || n != 1 {
		t.Fatalf("requeue dead = %d, %v", n, err)
	}
	if got := receive(t, d, 1, time.Minute); len(got) != 1 || got[0].ID != deadCanon || !bytes.Equal(got[0].Body, deadBody) {
		t.Fatalf("requeued dead letter: %+v", got)
	}
}

// olderReleaseFails runs the statements by which the release before schema
// step 11 pushes, claims, settles and inspects messages (as its
// queries.go, policy.go and results.go wrote them) on the migrated schema
// s: each must fail, a column or function it names being gone, and leave
// the queue's rows as they were.
func olderReleaseFails(t *testing.T, pool *pgxpool.Pool, s, queue string) {
	ctx := ctxT(t)
	snapshot := func() string {
		var v string
		if err := pool.QueryRow(ctx, `SELECT (SELECT string_agg(m::text, ',' ORDER BY id) FROM `+s+`.messages m) ||
			(SELECT string_agg(d::text, ',' ORDER BY id) FROM `+s+`.dead_letters d)`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := snapshot()
	r := strings.NewReplacer("{{s}}", s)
	for _, tc := range []struct{ op, sql string }{
		{"push", `INSERT INTO {{s}}.messages (queue, task_id, body, priority, visible_at, concurrency_key, rate_key, trace_parent)
			VALUES ($1, NULLIF('t'::text, ''), 'b'::bytea, 0, now(), NULL, NULL, NULL) RETURNING id, coalesce(task_id, '')`},
		{"claim", `WITH c AS (
				SELECT ctid FROM {{s}}.messages WHERE queue = $1 AND visible_at <= now() ORDER BY priority DESC, id LIMIT 10 FOR UPDATE SKIP LOCKED)
			UPDATE {{s}}.messages m SET visible_at = now() + interval '1 minute', lease = gen_random_uuid(), deliveries = m.deliveries + 1
			FROM c WHERE m.ctid = c.ctid
			RETURNING m.id, coalesce(m.task_id, ''), m.body, m.deliveries, m.enqueued_at, m.lease::text, m.priority, coalesce(m.trace_parent, '')`},
		{"claim under policies", `SELECT c.* FROM {{s}}.claim_with_policies($1, 10, 60000000) AS c`},
		{"requeue", `UPDATE {{s}}.messages m SET visible_at = now(), lease = NULL, body = coalesce(NULL::bytea, m.body)
			WHERE m.queue = $1 RETURNING m.id`},
		{"dead-letter", `WITH d AS (
				DELETE FROM {{s}}.messages m WHERE m.queue = $1
				RETURNING m.id, m.queue, m.task_id, m.body, m.priority, m.enqueued_at, m.deliveries, 'r'::text, 'd'::text, m.concurrency_key, m.rate_key)
			INSERT INTO {{s}}.dead_letters (id, queue, task_id, body, priority, enqueued_at, deliveries, reason, detail, concurrency_key, rate_key)
			SELECT * FROM d RETURNING id`},
		{"duplicates", `SELECT id, task_id FROM {{s}}.messages WHERE queue = $1 AND task_id = ANY(ARRAY['in-flight'])`},
		{"peek", `SELECT id, coalesce(task_id, ''), body FROM {{s}}.messages WHERE queue = $1`},
		{"cancel", `DELETE FROM {{s}}.messages WHERE queue = $1 AND task_id = ANY(ARRAY['in-flight']) RETURNING task_id`},
		{"list dead letters", `SELECT id, coalesce(task_id, ''), body FROM {{s}}.dead_letters WHERE queue = $1`},
		{"requeue dead letters", `WITH d AS (
				DELETE FROM {{s}}.dead_letters WHERE queue = $1 RETURNING id, queue, task_id, body, priority, enqueued_at, dead_at, concurrency_key, rate_key)
			INSERT INTO {{s}}.messages (queue, task_id, body, priority, enqueued_at, concurrency_key, rate_key)
			SELECT queue, task_id, body, priority, enqueued_at, concurrency_key, rate_key FROM d ON CONFLICT (queue, task_id) DO NOTHING RETURNING id`},
	} {
		_, err := pool.Exec(ctx, r.Replace(tc.sql), queue)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "42703" && pe.Code != "42883") {
			t.Errorf("%s as the release before runs it: %v; want it to fail on a column or function that is gone", tc.op, err)
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("the statements of the release before changed the rows:\n%s\nwant\n%s", after, before)
	}
}

// TestTasksWithoutIDNeverDedup: tasks without an ID are stored with a NULL
// key, which the dedup index never matches, in a batch and one at a time.
func TestTasksWithoutIDNeverDedup(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	for _, batch := range [][]*driver.Message{{{Body: []byte("a")}, {Body: []byte("b")}}, {{Body: []byte("c")}}, {{Body: []byte("d")}}} {
		res, err := d.Push(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Duplicate || r.MessageID == "" {
				t.Fatalf("a task without an ID: %+v; want it stored", r)
			}
		}
	}
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.sql.messagesTable+` WHERE queue = $1 AND task_key IS NULL`, d.cfg.queue).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d messages with a NULL key, %v; want 4", n, err)
	}
}

// TestReplacementBodies: a requeue's or a dead-lettering's new body is
// stored packed when the lease is the claim's own (it carries the task
// ID), whole when the lease was made elsewhere, and read back as it was
// either way.
func TestReplacementBodies(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	id := "2adbe2df93a2d35c95189a587675abde"
	retried := bytes.Replace(envelope(1, id), []byte(`"num_retries": 0`), []byte(`"num_retries": 1`), 1)
	if _, err := d.Push(ctx, []*driver.Message{{ID: id, Body: envelope(1, id)}}); err != nil {
		t.Fatal(err)
	}
	storedLen := func() int {
		var n int
		if err := d.pool.QueryRow(ctx, `SELECT coalesce((SELECT octet_length(packed_body) FROM `+d.sql.messagesTable+` WHERE queue = $1),
			(SELECT octet_length(packed_body) FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.dead_letters WHERE queue = $1))`, d.cfg.queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name   string
		lease  func(driver.Lease) driver.Lease
		packed bool
	}{
		{"the claim's lease", func(l driver.Lease) driver.Lease { return l }, true},
		{"a lease made elsewhere", func(l driver.Lease) driver.Lease { return driver.Lease{MessageID: l.MessageID, Token: l.Token} }, false},
	} {
		got := receive(t, d, 1, time.Minute)
		if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: tc.lease(got[0].Lease), Body: retried}}); errs != nil {
			t.Fatal(errs)
		}
		if n := storedLen(); (n < len(retried)) != tc.packed {
			t.Errorf("%s: a %d-byte requeued body is stored in %d bytes; want packed %v", tc.name, len(retried), n, tc.packed)
		}
		if got := receive(t, d, 1, time.Minute); len(got) != 1 || !bytes.Equal(got[0].Body, retried) {
			t.Fatalf("%s: requeued body read back as %+v; want %q", tc.name, got, retried)
		} else if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: got[0].Lease}}); errs != nil {
			t.Fatal(errs)
		}
	}
	got := receive(t, d, 1, time.Minute)
	final := append(bytes.Clone(retried[:len(retried)-2]), `", "attempts": []}`...)
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: got[0].Lease, Reason: "r", Body: final}}); errs != nil {
		t.Fatal(errs)
	}
	if dead, err := d.ListDead(ctx, 1); err != nil || len(dead) != 1 || !bytes.Equal(dead[0].Body, final) {
		t.Fatalf("dead letter with a new body: %+v, %v; want %q", dead, err, final)
	}
}
