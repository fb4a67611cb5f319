package cronslot

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseRefusesBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, tz, want string
	}{
		{"* * *", "", "five fields"},
		{"61 * * * *", "", "five fields"},
		{"not cron", "", "cron expression"},
		{"0 3 * * *", "Mars/Olympus", "unknown time zone"},
		{"0 3 * * *", "Local", "unknown time zone"},
		{"TZ=UTC 0 3 * * *", "", "--tz"},
		{"0 0 30 2 *", "", "never matches"},
		// robfig would fire these every second.
		{"@every -1m", "", "it is negative; use 1s or more"},
		{"@every 0s", "", "use 1s or more"},
		{"@every 1ms", "", "use 1s or more"},
		{"@every 1500ms", "", "whole seconds"},
		{"@every", "", "it is empty"},
		{"@every15m", "", "a space and a duration"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.expr, tt.tz)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q, %q) = %v; want an error saying %q", tt.expr, tt.tz, err, tt.want)
		}
	}
}

func TestDue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		expr, tz  string
		last, now string
		missed    driver.MissedPolicy
		want      string // "" for none
	}{
		{"slot due now", "0 * * * *", "", "2026-01-01T09:30:00Z", "2026-01-01T10:00:05Z", driver.MissedSkip, "2026-01-01T10:00:00Z"},
		{"slot already fired", "0 * * * *", "", "2026-01-01T10:00:00Z", "2026-01-01T10:00:05Z", driver.MissedSkip, ""},
		{"before the first slot", "0 * * * *", "", "2026-01-01T09:30:00Z", "2026-01-01T09:59:59Z", driver.MissedSkip, ""},
		{"skip: slot too late", "0 * * * *", "", "2026-01-01T08:30:00Z", "2026-01-01T10:05:00Z", driver.MissedSkip, ""},
		{"once: one catch-up for many missed", "0 * * * *", "", "2026-01-01T03:30:00Z", "2026-01-01T10:05:00Z", driver.MissedOnce, "2026-01-01T10:00:00Z"},
		{"once: nothing missed", "0 * * * *", "", "2026-01-01T10:00:00Z", "2026-01-01T10:59:00Z", driver.MissedOnce, ""},
		{"once: a yearly slot long ago", "0 0 1 1 *", "", "2024-06-01T00:00:00Z", "2026-03-01T00:00:00Z", driver.MissedOnce, "2026-01-01T00:00:00Z"},
		{"zone: 03:00 Berlin is 02:00 UTC in winter", "0 3 * * *", "Europe/Berlin", "2026-01-01T12:00:00Z", "2026-01-02T02:00:30Z", driver.MissedSkip, "2026-01-02T02:00:00Z"},
		{"zone: 03:00 Berlin is 01:00 UTC in summer", "0 3 * * *", "Europe/Berlin", "2026-07-01T12:00:00Z", "2026-07-02T01:00:30Z", driver.MissedSkip, "2026-07-02T01:00:00Z"},
		{"zone: UTC reading of the same expression", "0 3 * * *", "", "2026-07-01T12:00:00Z", "2026-07-02T01:00:30Z", driver.MissedSkip, ""},
		{"every: whole multiples", "@every 15m", "", "2026-01-01T10:00:00Z", "2026-01-01T10:31:00Z", driver.MissedSkip, "2026-01-01T10:30:00Z"},
		{"descriptor", "@daily", "", "2026-01-01T12:00:00Z", "2026-01-02T00:00:10Z", driver.MissedSkip, "2026-01-02T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(tt.expr, tt.tz)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := c.Due(at(tt.last), at(tt.now), tt.missed)
			if tt.want == "" {
				if ok {
					t.Errorf("Due = %v; want no slot", got)
				}
				return
			}
			if !ok || !got.Equal(at(tt.want)) {
				t.Errorf("Due = %v, %v; want %s", got, ok, tt.want)
			}
		})
	}
}

func TestNextInZone(t *testing.T) {
	t.Parallel()
	c, err := Parse("30 9 * * MON-FRI", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	// Saturday 2026-01-03: the next weekday slot is Monday 09:30 New York,
	// 14:30 UTC.
	got := c.Next(at("2026-01-03T12:00:00Z"))
	if want := at("2026-01-05T14:30:00Z"); !got.Equal(want) {
		t.Errorf("Next = %v; want %v", got, want)
	}
}

// TestEveryTakesJobqDurations: @every reads durations as the rest of jobq
// does, days and weeks too, into slots at whole multiples of it.
func TestEveryTakesJobqDurations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want time.Duration
	}{{"@every 1s", time.Second}, {"@every 90m", 90 * time.Minute}, {"@every 7d", 7 * 24 * time.Hour}, {"@every 1w", 7 * 24 * time.Hour}}
	for _, tt := range tests {
		c, err := Parse(tt.expr, "")
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.expr, err)
		}
		from := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
		first := c.Next(from)
		if got := c.Next(first).Sub(first); got != tt.want {
			t.Errorf("%s: slots %v apart; want %v", tt.expr, got, tt.want)
		}
		if !first.Truncate(tt.want).Equal(first) {
			t.Errorf("%s: slot %v is not a whole multiple of %v", tt.expr, first, tt.want)
		}
	}
}

// TestRepeatedHourRunsOnce: in the hour that the change back from daylight
// saving repeats, a daily slot runs once, and an hourly expression keeps
// both hours' slots.
func TestRepeatedHourRunsOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want []string // the slots from 2027-10-30T23:00Z on (Berlin goes back at 01:00Z on the 31st)
	}{
		{"30 2 * * *", []string{"2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"}},
		{"0 * * * *", []string{"2027-10-31T00:00:00Z", "2027-10-31T01:00:00Z", "2027-10-31T02:00:00Z"}},
		{"*/30 2 * * *", []string{"2027-10-31T00:00:00Z", "2027-10-31T00:30:00Z", "2027-11-01T01:00:00Z"}},
		// A step over every hour runs in both, as cron does.
		{"0 */2 * * *", []string{"2027-10-31T00:00:00Z", "2027-10-31T01:00:00Z", "2027-10-31T03:00:00Z"}},
		{"0 0-23/2 * * *", []string{"2027-10-31T00:00:00Z", "2027-10-31T03:00:00Z"}},
	}
	for _, tt := range tests {
		c, err := Parse(tt.expr, "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		s := at("2027-10-30T23:00:00Z")
		for i, w := range tt.want {
			s = c.Next(s)
			if !s.Equal(at(w)) {
				t.Errorf("%s: slot %d is %v; want %s", tt.expr, i+1, s.UTC(), w)
				break
			}
		}
	}
}
