package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
)

// poolWith opens a pool on the test server whose connections start with
// the given server settings, closed after the test.
func poolWith(t *testing.T, settings map[string]string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testConnString())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range settings {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestReadOnlyServerFailsClearly: on a server that refuses writes (a hot
// standby, or default_transaction_read_only on for the role), a push and
// a claim fail with FailedPrecondition, which a worker does not retry
// forever, naming the cause; the push is known not to be stored. They
// were Unknown, so the push reported its task as perhaps stored and the
// worker retried the claim without end, saying the answer was lost.
func TestReadOnlyServerFailsClearly(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	w := openDriver(t) // creates the schema
	ro, err := New(ctx, poolWith(t, map[string]string{"default_transaction_read_only": "on"}),
		Options{Schema: w.cfg.schema, Queue: w.cfg.queue, NoListen: true})
	if err != nil {
		t.Fatalf("open of an up-to-date schema on a read-only server: %v", err)
	}
	defer ro.Close()

	_, perr := ro.Push(ctx, []*driver.Message{msg("a")})
	_, rerr := ro.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute})
	for _, c := range []struct {
		op  string
		err error
	}{{"push", perr}, {"receive", rerr}} {
		if errcode.Of(c.err) != errcode.FailedPrecondition || !strings.Contains(fmtErr(c.err), "accepts no writes") {
			t.Errorf("%s on a read-only server: %v (code %v); want FailedPrecondition saying it accepts no writes", c.op, c.err, errcode.Of(c.err))
		}
	}
	if a := driver.AppliedOf(perr, errcode.Of(perr)); a != driver.NotApplied {
		t.Errorf("push on a read-only server: %v; want NotApplied", a)
	}
}

// TestStatementTimeoutIsRetriedNotUnknown: a statement the server cancels
// at its statement_timeout (here: a push waiting for a lock held
// elsewhere) is Unavailable, so the portable layer and the worker retry
// it, and a push is known not to be stored; the error names the setting.
// It was Canceled with an unknown outcome: a worker gave up completing a
// task that had succeeded, which then ran again after its lease.
func TestStatementTimeoutIsRetriedNotUnknown(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	w := openDriver(t)
	d, err := New(ctx, poolWith(t, map[string]string{"statement_timeout": "200ms"}),
		Options{Schema: w.cfg.schema, Queue: w.cfg.queue, NoListen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	// Hold the queue's table until the push has been cancelled.
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{w.cfg.schema}.Sanitize()+`.messages IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	_, perr := d.Push(ctx, []*driver.Message{msg("a")})
	if errcode.Of(perr) != errcode.Unavailable || !strings.Contains(fmtErr(perr), "statement_timeout") {
		t.Errorf("push cancelled by statement_timeout: %v (code %v); want Unavailable naming statement_timeout", perr, errcode.Of(perr))
	}
	if a := driver.AppliedOf(perr, errcode.Of(perr)); a != driver.NotApplied {
		t.Errorf("push cancelled by statement_timeout: %v; want NotApplied", a)
	}
	tx.Rollback(ctx)
	if st, err := w.Stats(ctx); err != nil || st.Ready != 0 {
		t.Errorf("stats after the cancelled push: %+v, %v; want nothing ready", st, err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestOpenWithoutCreateRights: a role without CREATE on the database
// opens a schema an administrator made for it (CREATE SCHEMA …
// AUTHORIZATION role), creating jobq's tables there; where it may not
// (no schema, or one it has no USAGE on) the open fails with
// PermissionDenied saying how to arrange it. The open ran CREATE SCHEMA
// IF NOT EXISTS, which needs CREATE on the database even when the schema
// exists, and reported only "permission denied for database".
func TestOpenWithoutCreateRights(t *testing.T) {
	t.Parallel()
	admin := poolWith(t, nil)
	for _, tc := range []struct {
		name  string
		setup string // run by the admin; %[1]s the schema, %[2]s the role
		want  string // "" when the open must succeed, else in the error
	}{
		{"schema owned by the role", `CREATE SCHEMA %[1]s AUTHORIZATION %[2]s`, ""},
		{"no schema", ``, "AUTHORIZATION"},
		{"schema of another role", `CREATE SCHEMA %[1]s`, "GRANT USAGE ON SCHEMA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			schema := fmt.Sprintf("jobq_noperm_%d_%d", time.Now().UnixNano(), queueSeq.Add(1))
			role := fmt.Sprintf("jobq_schema_role_%d_%d", time.Now().UnixNano(), queueSeq.Add(1))
			if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` NOLOGIN`); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
				admin.Exec(ctx, `DROP OWNED BY `+role)
				admin.Exec(ctx, `DROP ROLE `+role)
			})
			if tc.setup != "" {
				if _, err := admin.Exec(ctx, fmt.Sprintf(tc.setup, schema, role)); err != nil {
					t.Fatal(err)
				}
			}
			d, err := New(ctx, poolWith(t, map[string]string{"role": role}), Options{Schema: schema, Queue: "q", NoListen: true})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("open as the schema's owner without CREATE on the database: %v", err)
				}
				defer d.Close()
				if _, err := d.Push(ctx, []*driver.Message{msg("a")}); err != nil {
					t.Fatalf("push: %v", err)
				}
				return
			}
			if err == nil {
				d.Close()
				t.Fatal("open succeeded; want PermissionDenied")
			}
			if errcode.Of(err) != errcode.PermissionDenied || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), role) {
				t.Fatalf("open: %v (code %v); want PermissionDenied naming the role and %q", err, errcode.Of(err), tc.want)
			}
		})
	}
}

// TestOpenWithoutGrantsOnANewTable: a role granted its rights before an
// upgrade added a table (here claim_cursors, whose grant is taken back)
// is refused at open, with PermissionDenied naming the table and the
// GRANT that fixes it; after that GRANT it opens, and the statements that
// use the table (a clear) work. The open succeeded, and a clear, or a
// claim under caps hours into a run, failed with a bare "permission
// denied for table claim_cursors". A role that may only read opens.
func TestOpenWithoutGrantsOnANewTable(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	owner := openDriver(t)
	s := pgx.Identifier{owner.cfg.schema}.Sanitize()
	opts := Options{Schema: owner.cfg.schema, Queue: owner.cfg.queue, NoListen: true}
	writer := roleWith(t, owner, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA `+s+` TO %s`,
		`REVOKE ALL ON `+s+`.claim_cursors FROM %s`)
	// A table of the application's in the schema, which the role may not
	// touch, is none of jobq's business.
	app := pgx.Identifier{owner.cfg.schema, fmt.Sprintf("app_table_%d", queueSeq.Add(1))}.Sanitize()
	if _, err := owner.pool.Exec(ctx, `CREATE TABLE `+app+` (x int)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.pool.Exec(context.Background(), `DROP TABLE `+app) })
	pool := poolWith(t, map[string]string{"role": writer})
	d, err := New(ctx, pool, opts)
	if err == nil {
		d.Close()
		t.Fatal("open without rights on claim_cursors succeeded")
	}
	fix := "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + s + " TO " + pgx.Identifier{writer}.Sanitize()
	if errcode.Of(err) != errcode.PermissionDenied || !strings.Contains(err.Error(), s+": claim_cursors (") || !strings.Contains(err.Error(), fix) {
		t.Fatalf("open: %v (code %v); want PermissionDenied naming claim_cursors alone and %q", err, errcode.Of(err), fix)
	}
	if _, err := owner.pool.Exec(ctx, fix); err != nil {
		t.Fatal(err)
	}
	d, err = New(ctx, pool, opts)
	if err != nil {
		t.Fatalf("open after the GRANT the error gave: %v", err)
	}
	defer d.Close()
	if _, err := d.Push(ctx, []*driver.Message{msg("a")}); err != nil {
		t.Fatalf("push: %v", err)
	}
	if n, err := d.Clear(ctx); err != nil || n != 1 {
		t.Fatalf("clear: %d, %v; want 1 task cleared", n, err)
	}

	// A role that may only read (a dashboard's, say) opens as before.
	reader := roleWith(t, owner, `GRANT SELECT ON ALL TABLES IN SCHEMA `+s+` TO %s`)
	r, err := New(ctx, poolWith(t, map[string]string{"role": reader}), opts)
	if err != nil {
		t.Fatalf("open by a role that may only read: %v", err)
	}
	defer r.Close()
	if st, err := r.Stats(ctx); err != nil || st.Ready != 0 {
		t.Fatalf("stats, read by a role that may only read: %+v, %v; want an empty queue", st, err)
	}
}

// roleWith creates a role with USAGE on owner's schema and runs grants
// (each with %s for the role) as owner; the role is dropped when t ends.
func roleWith(t *testing.T, owner *Driver, grants ...string) string {
	t.Helper()
	ctx := ctxT(t)
	role := fmt.Sprintf("jobq_grants_role_%d_%d", time.Now().UnixNano(), queueSeq.Add(1))
	stmts := []string{`CREATE ROLE ` + role + ` NOLOGIN`, `GRANT USAGE ON SCHEMA ` + pgx.Identifier{owner.cfg.schema}.Sanitize() + ` TO ` + role}
	for _, g := range grants {
		stmts = append(stmts, fmt.Sprintf(g, role))
	}
	for _, stmt := range stmts {
		if _, err := owner.pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		owner.pool.Exec(ctx, `DROP OWNED BY `+role)
		owner.pool.Exec(ctx, `DROP ROLE `+role)
	})
	return role
}

// TestListenOutlivesIdleSessionTimeout: an idle_session_timeout set for
// jobq's role does not end the LISTEN connection, which is idle by
// design. It did after every quiet spell, and the queue logged "LISTEN
// connection lost; reconnecting" each time, without end.
func TestListenOutlivesIdleSessionTimeout(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	w := openDriver(t)
	var version int
	if err := w.pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		t.Skip("idle_session_timeout is Postgres 14's")
	}
	var logged syncbuf.Buffer
	d, err := New(ctx, poolWith(t, map[string]string{"idle_session_timeout": "100ms"}),
		Options{Schema: w.cfg.schema, Queue: w.cfg.queue, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.startListener()
	for !d.listening.Load() {
		time.Sleep(time.Millisecond)
	}
	// Ten times the timeout, for the server to end the session if it may.
	time.Sleep(time.Second)
	if s := logged.String(); strings.Contains(s, "LISTEN connection lost") {
		t.Fatalf("the LISTEN connection was ended by idle_session_timeout: %s", s)
	}
	if !d.listening.Load() {
		t.Fatal("not listening after a quiet second")
	}
}

// TestTooManyConnectionsIsRetriedAndSaysWhich: a connection refused for a
// connection limit (here a role with CONNECTION LIMIT 0) is Unavailable,
// which a push retries while connections free up, and the error names
// pool_max_conns. It was ResourceExhausted: a push failed at once, and a
// worker said the engine refused writes for a full disk or memory.
func TestTooManyConnectionsIsRetriedAndSaysWhich(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	w := openDriver(t)
	role := fmt.Sprintf("jobq_conn_limit_%d", time.Now().UnixNano())
	if _, err := w.pool.Exec(ctx, `CREATE ROLE `+role+` LOGIN CONNECTION LIMIT 0`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := w.pool.Exec(ctx, `DROP ROLE `+role); err != nil {
			t.Errorf("dropping role %s: %v", role, err)
		}
	})
	cfg, err := pgxpool.ParseConfig(testConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	cfg.ConnConfig.Password = ""
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := New(ctx, pool, Options{Schema: w.cfg.schema, Queue: w.cfg.queue, NoListen: true})
	if err == nil {
		d.Close()
		t.Fatal("open over the role's connection limit succeeded")
	}
	if errcode.Of(err) == errcode.PermissionDenied {
		t.Skipf("the server does not let the test log in as a new role: %v", err)
	}
	if errcode.Of(err) != errcode.Unavailable || !strings.Contains(err.Error(), "pool_max_conns") {
		t.Fatalf("open over the role's connection limit: %v (code %v); want Unavailable naming pool_max_conns", err, errcode.Of(err))
	}
}
