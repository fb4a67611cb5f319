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

// TestWorkerHeartbeatOnSkewedClock: a worker whose clock is off by minutes
// from the lister's is listed with its heartbeat as long ago as it was
// (on the lister's clock): a live worker behind is not taken for vanished,
// and one ahead that fell silent is not taken for live.
func TestWorkerHeartbeatOnSkewedClock(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t)
	lister := openURL(t, raw)
	for _, skew := range []time.Duration{-10 * time.Minute, -30 * time.Second, 30 * time.Second, 10 * time.Minute} {
		for _, silent := range []time.Duration{0, time.Minute} {
			w := openURL(t, raw)
			w.clock = func() time.Time { return time.Now().Add(skew) }
			rec := &driver.WorkerRecord{ID: "w", Heartbeat: w.clock().Add(-silent), Data: []byte("{}")}
			if err := w.PutWorker(ctxT(t), rec); err != nil {
				t.Fatal(err)
			}
			got, err := lister.ListWorkers(ctxT(t), time.Now().Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("skew %v: %d workers listed, want 1", skew, len(got))
			}
			if ago := time.Since(got[0].Heartbeat); ago < silent-time.Second || ago > silent+time.Second {
				t.Errorf("worker %v off, silent for %v: its heartbeat is listed %v ago", skew, silent, ago)
			}
		}
	}
	// A purge by a lister whose clock is ahead deletes no record that is
	// younger than it asked for on the database's clock.
	if err := lister.PutWorker(ctxT(t), &driver.WorkerRecord{ID: "w", Heartbeat: time.Now(), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	p := openURL(t, raw)
	p.clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
	if n, err := p.PurgeWorkers(ctxT(t), p.clock().Add(-5*time.Minute)); err != nil || n != 0 {
		t.Fatalf("purge of records older than 5 minutes by a clock 10 minutes ahead: %d deleted, %v; want 0", n, err)
	}
}
