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
