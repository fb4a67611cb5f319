package redis

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestNotBeforeOnSkewedClock: a producer whose clock is off by minutes
// from Redis's delays a task by what it asked for (NotBefore less its own
// now), not until its NotBefore on Redis's clock, which would run the task
// at once or minutes late.
func TestNotBeforeOnSkewedClock(t *testing.T) {
	t.Parallel()
	const delay = 30 * time.Second
	for _, skew := range []time.Duration{-10 * time.Minute, -30 * time.Second, 30 * time.Second, 10 * time.Minute} {
		for _, n := range []int{1, 2} {
			d := openDriver(t)
			d.clock = func() time.Time { return time.Now().Add(skew) }
			msgs := make([]*driver.Message, n)
			for i := range msgs {
				msgs[i] = msg(string(rune('a'+i)), 0)
				msgs[i].NotBefore = d.clock().Add(delay)
			}
			push(t, d, msgs...)
			ctx := testCtx(t)
			due, err := d.client.ZRangeWithScores(ctx, d.keys[2], 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			now, err := d.client.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(due) != n {
				t.Fatalf("skew %v: %d messages delayed, want %d", skew, len(due), n)
			}
			for _, z := range due {
				if got := time.UnixMilli(int64(z.Score)).Sub(now); got <= 0 || got > delay {
					t.Errorf("skew %v, %d messages: due in %v by Redis's clock, want within (0, %v]", skew, n, got, delay)
				}
			}
		}
	}
}

// TestWorkerHeartbeatOnSkewedClock: a worker whose clock is off by minutes
// from the lister's is listed with its heartbeat as long ago as it was
// (on the lister's clock): a live worker behind is not taken for vanished,
// and one ahead that fell silent is not taken for live; a purge by a
// clock ahead deletes no record younger than it asked for.
func TestWorkerHeartbeatOnSkewedClock(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "")
	lister := openURL(t, raw)
	ctx := testCtx(t)
	for _, skew := range []time.Duration{-10 * time.Minute, -30 * time.Second, 30 * time.Second, 10 * time.Minute} {
		for _, silent := range []time.Duration{0, time.Minute} {
			w := openURL(t, raw)
			w.clock = func() time.Time { return time.Now().Add(skew) }
			rec := &driver.WorkerRecord{ID: "w", Heartbeat: w.clock().Add(-silent), Data: []byte("{}")}
			if err := w.PutWorker(ctx, rec); err != nil {
				t.Fatal(err)
			}
			got, err := lister.ListWorkers(ctx, time.Now().Add(-time.Hour))
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
	if err := lister.PutWorker(ctx, &driver.WorkerRecord{ID: "w", Heartbeat: time.Now(), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	p := openURL(t, raw)
	p.clock = func() time.Time { return time.Now().Add(10 * time.Minute) }
	if n, err := p.PurgeWorkers(ctx, p.clock().Add(-5*time.Minute)); err != nil || n != 0 {
		t.Fatalf("purge of records older than 5 minutes by a clock 10 minutes ahead: %d deleted, %v; want 0", n, err)
	}
}
