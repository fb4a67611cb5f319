package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/spinconn"
)

// userPool is a pool the test builds itself, as an application would, with
// a BeforeConnect hook that names its connections appName.
func userPool(t *testing.T, appName string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.RuntimeParams["application_name"] = appName
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newFromPool builds a driver on pool for a queue no other test uses and
// deletes its rows after the test.
func newFromPool(t *testing.T, pool *pgxpool.Pool, opts Options) *Driver {
	t.Helper()
	u, err := url.Parse(newQueueURL(t))
	if err != nil {
		t.Fatal(err)
	}
	opts.Queue, opts.Schema = u.Query().Get("queue"), testSchema
	opts.Logger = slog.New(slog.DiscardHandler)
	d, err := New(ctxT(t), pool, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DELETE FROM `+pgx.Identifier{testSchema, "messages"}.Sanitize()+` WHERE queue = $1`, opts.Queue); err != nil {
			t.Logf("cleanup: %v", err)
		}
		d.Close()
	})
	return d
}

// pushReceiveComplete runs one task through d: push, a waiting receive,
// complete.
func pushReceiveComplete(t *testing.T, d *Driver) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("t1")}); err != nil {
		t.Fatalf("push: %v", err)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Second})
	if err != nil || len(got) != 1 || got[0].ID != "t1" {
		t.Fatalf("receive = %v, %v; want the pushed task t1", got, err)
	}
	if errs := d.Complete(ctx, driver.Completions(got[0].Lease)); errs != nil {
		t.Fatalf("complete: %v", errs[0])
	}
	if st, err := d.Stats(ctx); err != nil || st.Ready+st.InFlight != 0 {
		t.Fatalf("stats after complete = %+v, %v; want an empty queue", st, err)
	}
}

// TestNewFromUserPool builds a queue from a pool the application owns:
// tasks go through it, and closing the driver leaves the pool usable.
func TestNewFromUserPool(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"defaults", Options{}},
		{"no listen", Options{NoListen: true, Poll: 10 * time.Millisecond}},
		{"async push without spin", Options{AsyncPush: true, Spin: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := userPool(t, "jobq-new-test")
			d := newFromPool(t, pool, tt.opts)
			pushReceiveComplete(t, d)
			if err := d.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			var one int
			if err := pool.QueryRow(ctxT(t), "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("the application's pool after the driver closed: %v", err)
			}
		})
	}
}

// TestOpenerClosesItsPool: a driver opened from a URL owns the pool it
// built and closes it.
func TestOpenerClosesItsPool(t *testing.T) {
	t.Parallel()
	d, err := openRaw(newQueueURL(t))
	if err != nil {
		t.Fatal(err)
	}
	pushReceiveComplete(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.pool.Ping(ctxT(t)); err == nil {
		t.Fatal("the opener's pool is still open after Close")
	}
}

// TestListenUsesThePoolsHooks: the LISTEN connection of a driver built on
// an application's pool is made by that pool, so that its BeforeConnect
// hook (which may fetch a password token) applies, and a push from another
// process wakes a receiver that would otherwise sleep for an hour. The
// listener used to dial its own connection from a copy of the pool's
// configuration, without the hook.
func TestListenUsesThePoolsHooks(t *testing.T) {
	t.Parallel()
	appName := fmt.Sprintf("jobq-listen-%d", time.Now().UnixNano())
	pool := userPool(t, appName)
	d := newFromPool(t, pool, Options{Poll: time.Hour})
	ctx := ctxT(t)
	type result struct {
		got []*driver.Received
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 20 * time.Second})
		done <- result{got, err}
	}()
	// Wait for the LISTEN connection (which registers the handle and
	// LISTENs in one statement: seats.go; not this query, which names
	// it too, nor its last run on another connection of the pool), then
	// push through another driver.
	for {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE '%await_seat%' AND query NOT LIKE '%pg_stat_activity%'`, appName).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("receive returned before any push: %v, %v", r.got, r.err)
		case <-ctx.Done():
			t.Fatalf("no LISTEN connection named %s (made through the pool's hook) appeared", appName)
		case <-time.After(10 * time.Millisecond):
		}
	}
	other := openURL(t, newQueueURL(t, "queue="+d.cfg.queue))
	if _, err := other.Push(ctx, []*driver.Message{msg("woken")}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.got) != 1 || r.got[0].ID != "woken" {
		t.Fatalf("receive = %v, %v; want the task pushed by another driver", r.got, r.err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	pool := userPool(t, "jobq-new-test")
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"long queue", Options{Queue: strings.Repeat("q", 201)}, "Queue"},
		{"NUL in queue", Options{Queue: "a\x00b"}, "without NUL"},
		{"bad schema", Options{Schema: "Drop-Table"}, "Schema"},
		{"negative poll", Options{Poll: -time.Second}, "Poll"},
		{"negative size", Options{MaxMessageBytes: -1}, "MaxMessageBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(ctxT(t), pool, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || errcode.Of(err) != errcode.InvalidArgument {
				t.Fatalf("New(%+v) = %v; want an InvalidArgument error naming %s", tt.opts, err, tt.want)
			}
		})
	}
	if _, err := New(ctxT(t), nil, Options{}); err == nil || errcode.Of(err) != errcode.InvalidArgument {
		t.Fatalf("New with a nil pool = %v; want InvalidArgument", err)
	}
}

// TestStartupRefusedNamesTheFix: PgBouncer's refusal of a startup
// parameter tells the user to add pgbouncer=true.
func TestStartupRefusedNamesTheFix(t *testing.T) {
	t.Parallel()
	refused := &pgconn.PgError{Severity: "FATAL", Code: "08P01", Message: "unsupported startup parameter: jit"}
	err := startupRefused(fmt.Errorf("connect: %w", refused))
	if !strings.Contains(err.Error(), "pgbouncer=true") || errcode.Of(err) != errcode.InvalidArgument {
		t.Fatalf("startupRefused = %v (code %v); want an InvalidArgument error naming pgbouncer=true", err, errcode.Of(err))
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatal("the server's error is no longer reachable with errors.As")
	}
	other := errors.New("connection refused")
	if startupRefused(other) != other {
		t.Fatal("startupRefused changed an unrelated error")
	}
}

// TestPgBouncerModeOnPostgres runs a queue opened with pgbouncer=true, as a
// PgBouncer user would, straight on Postgres: no startup settings, no
// LISTEN, unnamed statements, and tasks still flow.
func TestPgBouncerModeOnPostgres(t *testing.T) {
	t.Parallel()
	d := openURL(t, newQueueURL(t, "pgbouncer=true", "poll=10ms"))
	if !d.cfg.noListen {
		t.Error("pgbouncer=true left LISTEN on")
	}
	cc := d.pool.Config().ConnConfig
	if _, set := cc.RuntimeParams["jit"]; set {
		t.Errorf("pgbouncer=true still sends startup parameters %v", cc.RuntimeParams)
	}
	if cc.DefaultQueryExecMode != pgx.QueryExecModeExec {
		t.Errorf("pgbouncer=true: exec mode %v, want exec", cc.DefaultQueryExecMode)
	}
	pushReceiveComplete(t, d)
}

// TestConfigurePool: a pool built from a configuration given to
// ConfigurePool has the opener's planner settings on every connection and
// connections a one-task push can make poll, and a value the application
// set itself wins.
func TestConfigurePool(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(testConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["enable_sort"] = "on"
	ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx := ctxT(t)
	for name, want := range map[string]string{"enable_seqscan": "off", "jit": "off", "enable_sort": "on"} {
		var got string
		if err := pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if spinconn.Of(c.Conn().PgConn().Conn()) == nil {
		t.Error("a connection of a configured pool cannot poll")
	}
}
