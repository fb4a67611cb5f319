package postgres

import (
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/spinconn"
)

// pollCounts sums the polls of the pool's idle connections and counts
// those left with polling on. It fails the test if a connection is wrapped
// for polling and wantWrapped is false, or the other way round.
func pollCounts(t *testing.T, d *Driver, wantWrapped bool) (polls int64, armed int) {
	t.Helper()
	// Sum over every connection of the pool: a background statement (the
	// trailing wake-up notification) may hold one for a moment, so take
	// them all idle at once, waiting until none is busy.
	var conns []*pgxpool.Conn
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		conns = d.pool.AcquireAllIdle(ctxT(t))
		if int32(len(conns)) == d.pool.Stat().TotalConns() || time.Now().After(deadline) {
			break
		}
		for _, c := range conns {
			c.Release()
		}
	}
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	if len(conns) == 0 {
		t.Fatal("the pool has no idle connection")
	}
	for _, c := range conns {
		sc := spinconn.Of(c.Conn().PgConn().Conn())
		if (sc != nil) != wantWrapped {
			t.Fatalf("connection wrapped for polling: %v, want %v", sc != nil, wantWrapped)
		}
		if sc == nil {
			continue
		}
		polls += sc.Stats().Polls
		if sc.Budget() != 0 {
			armed++
		}
	}
	return polls, armed
}

// TestOnlyOneTaskPushesPoll checks spin=: a one-task push polls for its
// reply and leaves its connection quiet again; batch pushes, claims and
// settlements never poll; spin=0 wraps nothing. Over TLS too, when the
// server offers it. Not parallel: a read polls only while no other polls
// in the process (internal/spinconn), and other tests push one at a time.
func TestOnlyOneTaskPushesPoll(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("with GOMAXPROCS=1 no read polls")
	}
	cases := []struct {
		name  string
		extra []string
	}{
		// listen=false: the LISTEN connection is taken out of the pool
		// when the listener starts, which would change the set of idle
		// connections whose polls the test sums.
		{"default", []string{"listen=false"}},
		{"tls", []string{"sslmode=require", "listen=false"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := newQueueURL(t, c.extra...)
			if c.name == "tls" && !offersTLS(raw) {
				t.Skip("the test server does not offer TLS")
			}
			d := openURL(t, raw)
			ctx := ctxT(t)
			if _, err := d.Push(ctx, []*driver.Message{msg("warm")}); err != nil {
				t.Fatal(err)
			}
			before, _ := pollCounts(t, d, true)
			// Twenty, so that some polls even if a slow commit made one
			// miss and the connection skip a few.
			for i := range 20 {
				if _, err := d.Push(ctx, []*driver.Message{msg("one-" + string(rune('a'+i)))}); err != nil {
					t.Fatal(err)
				}
			}
			afterOnes, armed := pollCounts(t, d, true)
			if afterOnes <= before {
				t.Fatalf("20 one-task pushes polled %d times; want some", afterOnes-before)
			}
			if armed != 0 {
				t.Fatalf("%d connections still poll after the pushes", armed)
			}

			if _, err := d.Push(ctx, []*driver.Message{msg("batch-a"), msg("batch-b")}); err != nil {
				t.Fatal(err)
			}
			got := receive(t, d, 30, time.Minute)
			if len(got) != 23 {
				t.Fatalf("claimed %d messages, want 23", len(got))
			}
			leases := make([]driver.Lease, len(got))
			for i, m := range got {
				leases[i] = m.Lease
			}
			if errs := d.Complete(ctx, driver.Completions(leases...)); errs != nil {
				t.Fatal(errs)
			}
			if afterAll, _ := pollCounts(t, d, true); afterAll != afterOnes {
				t.Fatalf("a batch push, a claim and a completion polled %d times; want none", afterAll-afterOnes)
			}
		})
	}
	t.Run("spin=0", func(t *testing.T) {
		d := openDriver(t, "spin=0")
		if _, err := d.Push(ctxT(t), []*driver.Message{msg("a")}); err != nil {
			t.Fatal(err)
		}
		pollCounts(t, d, false)
	})
}

// offersTLS reports whether the server at raw accepts a TLS connection.
func offersTLS(raw string) bool {
	d, err := openRaw(raw)
	if err != nil {
		return false
	}
	d.Close()
	return true
}
