package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/pgbouncer"
)

// startPgBouncer runs pgbouncer (tools/testkit/pgbouncer) in transaction pooling
// mode in front of the test server, with serverConns server connections for
// all its clients, and returns the test URL pointed at it. The test is
// skipped when pgbouncer is not installed.
func startPgBouncer(t *testing.T, serverConns int) string {
	t.Helper()
	b, err := pgbouncer.Start(testBaseURL(), serverConns, 500)
	if errors.Is(err, pgbouncer.ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	u, err := b.URL(testBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// bouncerQueueURL is a fresh queue's URL through the bouncer at base.
func bouncerQueueURL(t *testing.T, base string, extra ...string) string {
	t.Helper()
	u, err := url.Parse(newQueueURL(t, extra...))
	if err != nil {
		t.Fatal(err)
	}
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = b.Host
	return u.String()
}

// TestPgBouncerTransactionPooling runs a queue through PgBouncer 1.18 in
// transaction pooling mode, as a fleet would: several drivers (one per
// worker process) on a few server connections push, claim and complete
// every task, and none is lost. Without pgbouncer=true the open fails with
// PgBouncer's "unsupported startup parameter" and the fix named.
func TestPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	base := startPgBouncer(t, 3)

	t.Run("refused without pgbouncer=true", func(t *testing.T) {
		_, err := openRaw(bouncerQueueURL(t, base))
		if err == nil || !strings.Contains(err.Error(), "pgbouncer=true") || errcode.Of(err) != errcode.InvalidArgument {
			t.Fatalf("open through PgBouncer without pgbouncer=true = %v; want an InvalidArgument error naming pgbouncer=true", err)
		}
	})

	t.Run("fleet drains the queue", func(t *testing.T) {
		raw := bouncerQueueURL(t, base, "pgbouncer=true", "poll=20ms", "pool_max_conns=4")
		const workers, tasks = 6, 300
		drivers := make([]*Driver, workers)
		for i := range drivers {
			drivers[i] = openURL(t, raw)
		}
		ctx := ctxT(t)
		msgs := make([]*driver.Message, tasks)
		for i := range msgs {
			msgs[i] = msg(fmt.Sprintf("t%03d", i))
		}
		// Pushes of one and of many, from different drivers.
		if _, err := drivers[0].Push(ctx, msgs[:tasks-10]); err != nil {
			t.Fatal(err)
		}
		for i, m := range msgs[tasks-10:] {
			if _, err := drivers[i%workers].Push(ctx, []*driver.Message{m}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[string]bool{}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for _, d := range drivers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					got, err := d.Receive(ctx, driver.ReceiveParams{Max: 8, Visibility: time.Minute, Wait: 100 * time.Millisecond})
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					leases := make([]driver.Lease, len(got))
					mu.Lock()
					for i, r := range got {
						seen[r.ID] = true
						leases[i] = r.Lease
					}
					mu.Unlock()
					if e := d.Complete(ctx, driver.Completions(leases...)); e != nil {
						errs <- fmt.Errorf("complete: %v", e)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(seen) != tasks {
			t.Fatalf("the fleet received %d distinct tasks of %d", len(seen), tasks)
		}
		if st, err := drivers[0].Stats(ctx); err != nil || st.Ready+st.InFlight+st.Delayed != 0 {
			t.Fatalf("stats after the drain = %+v, %v; want an empty queue", st, err)
		}
	})

	t.Run("New on an application's pool", func(t *testing.T) {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		v := u.Query()
		v.Set("default_query_exec_mode", "exec")
		u.RawQuery = v.Encode()
		cfg, err := pgxpool.ParseConfig(u.String())
		if err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close) // after the driver's clean-up
		d := newFromPool(t, pool, Options{NoListen: true, Poll: 20 * time.Millisecond})
		pushReceiveComplete(t, d)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pool.Ping(context.Background()); err != nil {
			t.Fatalf("the application's pool after the driver closed: %v", err)
		}
	})
}
