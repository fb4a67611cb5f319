// Package cronslot is the pure logic of recurring schedules: it reads a
// cron expression in a time zone and decides, from a clock reading and the
// last slot fired, which slot (if any) is due. It keeps no state and reads
// no clock, so it is tested with any "now".
//
// Cron expressions are parsed by github.com/robfig/cron/v3, the parser most
// Go schedulers use: standard five fields, ranges, steps, names (MON, JAN)
// and descriptors (@hourly, @daily, @weekly, @monthly, @yearly, @every D),
// with daylight-saving gaps and repeats handled in the zone. @every D fires
// at whole multiples of D (since Go's zero time, so @every 15m fires at
// :00, :15, :30 and :45 UTC), the same slots for every process.
package cronslot

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/bound"
)

// parser reads the standard five fields and descriptors.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Cron is a parsed cron expression in its time zone.
type Cron struct {
	sched cron.Schedule
	loc   *time.Location
	every time.Duration // @every D: slots at whole multiples of D
	// hourStar: the hour field starts with * (*, */2), which cron reads
	// as "every hour" in a repeated hour too.
	hourStar bool
}

// Parse reads expr in the IANA zone tz (empty: UTC). Its errors say what
// to fix.
func Parse(expr, tz string) (Cron, error) {
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || strings.EqualFold(tz, "local") {
			return Cron{}, fmt.Errorf("unknown time zone %q: give an IANA zone name such as UTC, Europe/Berlin or America/New_York", tz)
		}
		loc = l
	}
	if strings.HasPrefix(strings.TrimSpace(expr), "TZ=") || strings.HasPrefix(strings.TrimSpace(expr), "CRON_TZ=") {
		return Cron{}, fmt.Errorf("cron expression %q: give the time zone with --tz (ScheduleOptions.TimeZone), not in the expression", expr)
	}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(expr), "@every"); ok {
		d, err := parseEvery(expr, rest)
		if err != nil {
			return Cron{}, err
		}
		return Cron{loc: loc, every: d}, nil
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return Cron{}, fmt.Errorf("cron expression %q: %v; write five fields (minute hour day-of-month month day-of-week), for example '*/15 * * * *' or '0 3 * * MON', or a descriptor such as @hourly", expr, err)
	}
	if probe := s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, loc)); probe.IsZero() {
		return Cron{}, fmt.Errorf("cron expression %q never matches a date (for example the 30th of February)", expr)
	}
	c := Cron{sched: s, loc: loc}
	if f := strings.Fields(expr); len(f) == 5 {
		c.hourStar = strings.HasPrefix(f[1], "*")
	}
	return c, nil
}

// everyRange is what @every takes: a whole number of seconds from one
// second on (a scheduler looks about every second).
var everyRange = bound.Durations{Min: time.Second}

// parseEvery reads the duration of "@every D" (rest is what follows
// @every), in jobq's duration syntax (days and weeks too). robfig's own
// reading counts from the time it is asked about, so two schedulers would
// disagree on the slots (here they are whole multiples of D, the same for
// every process), and it turns a zero, negative or sub-second D into one
// second without a word.
func parseEvery(expr, rest string) (time.Duration, error) {
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return 0, fmt.Errorf("cron expression %q: write @every, a space and a duration, for example '@every 15m'", expr)
	}
	d, err := everyRange.Parse("", rest)
	if err != nil {
		return 0, fmt.Errorf("cron expression %q: the duration after @every is invalid: %v", expr, err)
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("cron expression %q: @every takes whole seconds (schedules fire at most once a second); for example '@every 2s'", expr)
	}
	return d, nil
}

// Next returns the first slot strictly after t. A slot whose local time
// repeats, in the hour that a change back from daylight saving runs twice,
// is taken once (the first time), as cron does, unless the expression's
// hour field is * or a step of it (*/2): then both hours have their slots.
func (c Cron) Next(t time.Time) time.Time {
	if c.every > 0 {
		return t.Truncate(c.every).Add(c.every).In(c.loc)
	}
	s := c.sched.Next(t.In(c.loc))
	for !s.IsZero() && c.oncePerWallTime() && repeatedWallTime(s) {
		s = c.sched.Next(s)
	}
	return s
}

// oncePerWallTime reports whether the expression names its hours (so a
// repeated local time would run its slot twice), rather than every hour
// or a step over every hour (*/2), which cron runs in both hours.
func (c Cron) oncePerWallTime() bool {
	spec, ok := c.sched.(*cron.SpecSchedule)
	const allHours = 1<<24 - 1
	return ok && !c.hourStar && spec.Hour&allHours != allHours
}

// repeatedWallTime reports whether the local time of s came before, a
// daylight-saving change earlier (zones shift by half an hour, an hour or
// two).
func repeatedWallTime(s time.Time) bool {
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		u := s.Add(-back)
		if u.Year() == s.Year() && u.YearDay() == s.YearDay() && u.Hour() == s.Hour() && u.Minute() == s.Minute() && u.Second() == s.Second() {
			return true
		}
	}
	return false
}

// Latest returns the latest slot at or before now that is strictly after
// after, and whether there is one.
func (c Cron) Latest(after, now time.Time) (time.Time, bool) {
	// Scan windows that grow back from now, so that a frequent expression
	// costs a few steps and a rare one (yearly) a few windows, however old
	// after is.
	for _, back := range []time.Duration{time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 367 * 24 * time.Hour} {
		from := now.Add(-back)
		if from.Before(after) {
			from = after
		}
		var last time.Time
		for s := c.Next(from); !s.IsZero() && !s.After(now); s = c.Next(s) {
			last = s
		}
		if !last.IsZero() || !from.After(after) {
			return last, !last.IsZero()
		}
	}
	return time.Time{}, false
}

// Due returns the slot to fire at now for a schedule whose last claimed
// slot (or, before any, creation time) is last, under the missed-run
// policy, and whether there is one.
//
//   - MissedSkip: the latest slot after last, if now is within
//     driver.ScheduleLateness of it (and before the slot after it).
//   - MissedOnce: the latest slot after last, however long ago: when
//     slots were missed, one catch-up run.
func (c Cron) Due(last, now time.Time, missed driver.MissedPolicy) (time.Time, bool) {
	slot, ok := c.Latest(last, now)
	if !ok {
		return time.Time{}, false
	}
	if missed == driver.MissedOnce {
		return slot, true
	}
	if now.Sub(slot) > driver.ScheduleLateness {
		return time.Time{}, false
	}
	return slot, true
}
