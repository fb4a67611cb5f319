package cronslot

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// FuzzCron: any expression and zone parse or fail with an error, never a
// panic; and a parsed expression's slots behave: Next is strictly later,
// Latest lies in (after, now] with no slot between it and now, and Due
// gives a slot only where Latest does.
func FuzzCron(f *testing.F) {
	for _, s := range [][2]string{
		{"*/15 * * * *", ""}, {"0 3 * * MON", "Europe/Berlin"}, {"30 2 * * *", "America/New_York"}, {"0 0 29 2 *", ""},
		{"@hourly", "Australia/Lord_Howe"}, {"@every 15m", ""}, {"@every 1s", "Asia/Kolkata"}, {"@every 106751d", ""},
		{"0 0 30 2 *", ""}, {"TZ=UTC 0 * * * *", ""}, {"1-5/2 */3 L * *", ""}, {"0 0 1 1 SUN", "Pacific/Apia"},
		{"@every 1e3", ""}, {"0 1 * * *", "Local"}, {"* * * * * *", ""}, {"0-59/61 * * * *", ""},
	} {
		f.Add(s[0], s[1], int64(1_700_000_000), int64(3600))
	}
	f.Fuzz(func(t *testing.T, expr, tz string, nowUnix, sinceSecs int64) {
		c, err := Parse(expr, tz)
		if err != nil {
			return
		}
		// Clocks from 1970 to 2200, and a last slot up to ten years back.
		now := time.Unix(nowUnix%(230*365*86400), 0)
		if now.Before(time.Unix(0, 0)) {
			now = now.Add(230 * 365 * 86400 * time.Second)
		}
		since := sinceSecs % (10 * 365 * 86400)
		if since < 0 {
			since = -since
		}
		after := now.Add(-time.Duration(since) * time.Second)
		if n := c.Next(now); !n.IsZero() && !n.After(now) {
			t.Fatalf("%q in %q: Next(%v) = %v, not later", expr, tz, now, n)
		}
		slot, ok := c.Latest(after, now)
		if ok {
			if !slot.After(after) || slot.After(now) {
				t.Fatalf("%q in %q: Latest(%v, %v) = %v, outside the window", expr, tz, after, now, slot)
			}
			if n := c.Next(slot); !n.IsZero() && !n.After(now) {
				t.Fatalf("%q in %q: Latest(%v, %v) = %v, but %v comes later and is not after now", expr, tz, after, now, slot, n)
			}
		} else if n := c.Next(after); now.Sub(after) < 5*367*24*time.Hour && !n.IsZero() && !n.After(now) {
			t.Fatalf("%q in %q: Latest(%v, %v) finds no slot, but %v is one", expr, tz, after, now, n)
		}
		for _, missed := range []driver.MissedPolicy{driver.MissedSkip, driver.MissedOnce} {
			due, dok := c.Due(after, now, missed)
			if dok && (!ok || !due.Equal(slot)) {
				t.Fatalf("%q in %q: Due(%v, %v, %v) = %v, but Latest says %v, %v", expr, tz, after, now, missed, due, slot, ok)
			}
		}
	})
}
