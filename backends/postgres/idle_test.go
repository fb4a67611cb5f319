package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
)

// queryCounter counts the statements a pool runs, by SQL text.
type queryCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.n[data.SQL]++
	c.mu.Unlock()
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// claims counts d's claims, with and without the look that follows an
// empty one (claimNext).
func claims(c *queryCounter, d *Driver) int { return c.count(d.sql.claim) + c.count(d.sql.claimNext) }

func (c *queryCounter) count(sql string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[sql]
}

// TestIdleReceiverSleepsLonger: a receiver on an empty queue claims less
// and less often, while LISTEN is up (a push wakes it anyway) and with
// LISTEN off (through PgBouncer), where an idle worker claimed every poll
// whatever its back-off. Without LISTEN the growth carries over to the
// next receive (the driver counts the empty looks in a row), and a look
// that finds a message ends it.
func TestIdleReceiverSleepsLonger(t *testing.T) {
	t.Parallel()
	const poll, wait = 50 * time.Millisecond, 2 * time.Second
	tests := []struct {
		name          string
		noListen      bool
		minimum, most int // claims in one Receive of wait
	}{
		// 50+100+200+400+800 ms, then the rest of the 2 s: about 7.
		{name: "listen", minimum: 3, most: 12},
		// The same without LISTEN (it claimed once per 50 ms: about 40).
		{name: "no-listen", noListen: true, minimum: 3, most: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg, err := pgxpool.ParseConfig(testConnString())
			if err != nil {
				t.Fatal(err)
			}
			counter := &queryCounter{n: map[string]int{}}
			cfg.ConnConfig.Tracer = counter
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			d, err := New(ctx, pool, Options{Queue: fmt.Sprintf("idle-%s-%d", tt.name, time.Now().UnixNano()),
				Schema: testSchema, Poll: poll, NoListen: tt.noListen})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if !tt.noListen {
				d.startListener()
				for !d.listening.Load() {
					time.Sleep(5 * time.Millisecond)
				}
			}
			got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: wait})
			if err != nil || len(got) != 0 {
				t.Fatalf("Receive on an empty queue: %d messages, %v", len(got), err)
			}
			n := claims(counter, d)
			t.Logf("%d claims in one idle Receive of %v", n, wait)
			if n < tt.minimum || n > tt.most {
				t.Errorf("%d claims in one idle Receive of %v with poll %v; want %d to %d", n, wait, poll, tt.minimum, tt.most)
			}
			if !tt.noListen {
				return
			}
			// The next receive goes on sleeping long: about 2 claims in
			// 1 s (at the poll it would have made 20).
			before := claims(counter, d)
			if _, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: wait / 2}); err != nil {
				t.Fatal(err)
			}
			if n := claims(counter, d) - before; n > 4 {
				t.Errorf("the next idle Receive of %v made %d claims; want its sleeps to stay long", wait/2, n)
			}
			// A message found sets the sleeps back to the poll.
			if _, err := d.Push(ctx, []*driver.Message{msg("a")}); err != nil {
				t.Fatal(err)
			}
			if got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: wait}); err != nil || len(got) != 1 {
				t.Fatalf("Receive: %d messages, %v", len(got), err)
			}
			if q := d.quiet.Load(); q != 0 {
				t.Errorf("after a receive that found a message, %d empty looks in a row are counted; want 0", q)
			}
		})
	}
}
