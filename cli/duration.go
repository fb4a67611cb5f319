package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// durationUnits are the units ParseDuration accepts: Go's, plus days and
// weeks as ai4s-jobq accepts them.
var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "ms": time.Millisecond,
	"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
}

// ParseDuration parses a duration in Go syntax extended with days and weeks
// ("90s", "10m", "1h30m", "2d", "1w", "1d12h"). A bare number is seconds, as
// in ai4s-jobq's environment variables ("600"). Negative durations are
// rejected.
func ParseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, fmt.Errorf("invalid duration %q: it is empty; use for example 90s, 10m, 1h30m, 2d or 1w", s)
	}
	if n, err := strconv.ParseFloat(in, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("invalid duration %q: it is negative", s)
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	var total float64
	rest := in
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] == '.' || (rest[i] >= '0' && rest[i] <= '9')) {
			i++
		}
		if i == 0 {
			return 0, badDuration(s)
		}
		num, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, badDuration(s)
		}
		rest = rest[i:]
		j := 0
		for j < len(rest) && !(rest[j] == '.' || (rest[j] >= '0' && rest[j] <= '9')) {
			j++
		}
		unit, ok := durationUnits[rest[:j]]
		if !ok {
			return 0, badDuration(s)
		}
		rest = rest[j:]
		total += num * float64(unit)
	}
	if total > float64(1<<63-1) {
		return 0, fmt.Errorf("invalid duration %q: it is too long", s)
	}
	return time.Duration(total), nil
}

func badDuration(s string) error {
	return fmt.Errorf("invalid duration %q: use a number with a unit (ns, us, ms, s, m, h, d, w), for example 90s, 10m, 1h30m, 2d or 1w", s)
}

// formatDuration prints d the way ParseDuration reads it, using days and
// weeks where they make it shorter.
func formatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d >= 7*day && d%(7*day) == 0:
		return fmt.Sprintf("%dw", d/(7*day))
	case d >= day && d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// durationValue is a pflag.Value for ParseDuration.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0" // what pflag takes for "no default worth showing"
	}
	return formatDuration(*v.d)
}

func (v durationValue) Set(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v durationValue) Type() string { return "duration" }
