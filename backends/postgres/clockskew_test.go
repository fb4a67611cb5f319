package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// TestNotBeforeOnSkewedClock: a pusher whose clock is off by minutes from
// the database's delays a task by what it asked for (NotBefore less its
// own now), not until its NotBefore on the database's clock, which would
// run the task at once or minutes late.
func TestNotBeforeOnSkewedClock(t *testing.T) {
	t.Parallel()
	const delay = 30 * time.Second
	for _, skew := range []time.Duration{-10 * time.Minute, -30 * time.Second, 30 * time.Second, 10 * time.Minute} {
		for _, n := range []int{1, 2} { // the one-row statement and the batch
			d := openDriver(t)
			d.clock = func() time.Time { return time.Now().Add(skew) }
			msgs := make([]*driver.Message, n)
			for i := range msgs {
				msgs[i] = msg(string(rune('a' + i)))
				msgs[i].NotBefore = d.clock().Add(delay)
			}
			if _, err := d.Push(ctxT(t), msgs); err != nil {
				t.Fatal(err)
			}
			rows, err := d.pool.Query(ctxT(t), `SELECT extract(epoch FROM visible_at - now())::float8 FROM `+
				pgx.Identifier{d.cfg.schema, "messages"}.Sanitize()+` WHERE queue = $1`, d.cfg.queue)
			if err != nil {
				t.Fatal(err)
			}
			left, err := pgx.CollectRows(rows, pgx.RowTo[float64])
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != n {
				t.Fatalf("skew %v: %d messages stored, want %d", skew, len(left), n)
			}
			for _, s := range left {
				if got := time.Duration(s * float64(time.Second)); got <= 0 || got > delay {
					t.Errorf("skew %v, %d messages: visible in %v by the database's clock, want within (0, %v]", skew, n, got, delay)
				}
			}
		}
	}
}
