// Package bound parses the durations and counts that users type — command
// line flags, JOBQ_* variables, queue URL parameters — with one set of
// rules: no NaN or infinity, no silent overflow of time.Duration, int32 or
// int, and an error that names the flag or parameter and the accepted
// range.
package bound

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxDuration is the longest time.Duration (about 292 years).
const MaxDuration = time.Duration(math.MaxInt64)

// maxInput bounds the length of a value; longer input is refused before it
// is parsed.
const maxInput = 128

// Error is a value that is malformed or out of range.
type Error struct {
	// Name says where the value came from: "--delay", "$JOBQ_TIME_LIMIT",
	// "query parameter poll". Empty when the caller adds it (pflag does).
	Name string
	// Value is the input as given.
	Value string
	// Problem says what is wrong, with the accepted syntax or range.
	Problem string
}

func (e *Error) Error() string {
	v := e.Value
	if len(v) > maxInput {
		v = v[:maxInput] + "..."
	}
	if e.Name == "" {
		return e.Problem // the caller names the value (pflag does)
	}
	return fmt.Sprintf("invalid %s=%q: %s", e.Name, v, e.Problem)
}

// Durations is the accepted range and syntax of a duration.
//
// The syntax is Go's (300ms, 1.5h, 1h30m) plus days (d, 24h) and weeks (w,
// 7d). Units: ns, us (or µs), ms, s, m, h, d, w. A bare number is seconds
// when BareSeconds is set (the command line and JOBQ_* variables, as in
// ai4s-jobq); otherwise only 0 may go without a unit.
type Durations struct {
	// Min and Max bound the value, inclusive. A zero Max means MaxDuration.
	// A negative value is accepted only when Min is negative.
	Min, Max time.Duration
	// BareSeconds reads a number without a unit as seconds.
	BareSeconds bool
}

// NonNegative is every duration from 0 to MaxDuration, bare numbers being
// seconds.
var NonNegative = Durations{BareSeconds: true}

func (r Durations) max() time.Duration {
	if r.Max == 0 {
		return MaxDuration
	}
	return r.Max
}

// Range says what the range accepts, for error messages and help.
func (r Durations) Range() string {
	if r.Min < 0 && r.max() == MaxDuration {
		return "use a duration of at most about 292 years (106751d)"
	}
	if r.max() == MaxDuration {
		return fmt.Sprintf("use %s or more, up to about 292 years (106751d)", Format(r.Min))
	}
	return fmt.Sprintf("use %s to %s", Format(r.Min), Format(r.max()))
}

func (r Durations) syntax() string {
	s := "use a number with a unit (ns, us, ms, s, m, h, d, w), for example 90s, 10m, 1h30m, 2d or 1w"
	if r.BareSeconds {
		s += "; a bare number is seconds"
	}
	return s
}

// Parse reads s as a duration in r. name says where s came from, for the
// error (see Error.Name).
func (r Durations) Parse(name, s string) (time.Duration, error) {
	fail := func(problem string) (time.Duration, error) {
		return 0, &Error{Name: name, Value: s, Problem: problem}
	}
	in := strings.TrimSpace(s)
	switch {
	case in == "":
		return fail("it is empty; " + r.syntax())
	case len(in) > maxInput:
		return fail("it is too long to be a duration; " + r.syntax())
	}
	neg := false
	body := in
	if body[0] == '-' || body[0] == '+' {
		neg = body[0] == '-'
		body = body[1:]
	}
	var d time.Duration
	var ok, overflow bool
	if bareNumber.MatchString(body) {
		if !r.BareSeconds && strings.Trim(body, "0.") != "" {
			return fail("it has no unit; " + r.syntax())
		}
		d, ok, overflow = parseSeconds(body)
	} else {
		d, ok, overflow = parseUnits(body)
	}
	switch {
	case !ok:
		return fail("not a duration; " + r.syntax())
	case overflow:
		return fail("too long; " + r.Range())
	}
	if neg {
		d = -d
	}
	if d < 0 && r.Min >= 0 {
		return fail("it is negative; " + r.Range())
	}
	if d < r.Min || d > r.max() {
		return fail("out of range; " + r.Range())
	}
	return d, nil
}

// bareNumber is a decimal number without a sign or unit, with an optional
// exponent of at most three digits (1e3).
var bareNumber = regexp.MustCompile(`^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$`)

// parseSeconds reads a bare number of seconds. ok is false for malformed
// input; overflow is set when it does not fit a time.Duration.
func parseSeconds(s string) (d time.Duration, ok, overflow bool) {
	if !strings.ContainsAny(s, "eE") {
		return parseUnits(s + "s")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Only a range error is possible after bareNumber matched.
		return 0, true, true
	}
	ns := f * float64(time.Second)
	// float64(MaxInt64) rounds up to 2^63, which does not fit.
	if math.IsNaN(ns) || ns >= float64(math.MaxInt64) {
		return 0, true, true
	}
	return time.Duration(ns), true, false
}

// units maps unit names to their length.
var units = map[string]uint64{
	"ns": uint64(time.Nanosecond),
	"us": uint64(time.Microsecond), "µs": uint64(time.Microsecond), "μs": uint64(time.Microsecond),
	"ms": uint64(time.Millisecond),
	"s":  uint64(time.Second),
	"m":  uint64(time.Minute),
	"h":  uint64(time.Hour),
	"d":  uint64(24 * time.Hour),
	"w":  uint64(7 * 24 * time.Hour),
}

// parseUnits reads a sequence of NUMBER UNIT pairs ("1h30m", "1.5d") with
// integer arithmetic, checking every step for overflow.
func parseUnits(s string) (d time.Duration, ok, overflow bool) {
	if s == "" {
		return 0, false, false
	}
	var total uint64
	for s != "" {
		whole, frac, unit, rest, ok := splitTerm(s)
		if !ok {
			return 0, false, false
		}
		v, over := termNanos(whole, frac, unit)
		if over || total > math.MaxInt64-v {
			return 0, true, true
		}
		total += v
		s = rest
	}
	return time.Duration(total), true, false
}

// splitTerm splits the first NUMBER UNIT pair off s: the digits before
// and after the decimal point, the unit's length and the rest of s. ok is
// false when the number has no digits or the unit is unknown.
func splitTerm(s string) (whole, frac string, unit uint64, rest string, ok bool) {
	i := leadingDigits(s)
	whole, s = s[:i], s[i:]
	if s != "" && s[0] == '.' {
		j := 1 + leadingDigits(s[1:])
		frac, s = s[1:j], s[j:]
	}
	if whole == "" && frac == "" {
		return "", "", 0, "", false
	}
	k := 0
	for k < len(s) && s[k] != '.' && (s[k] < '0' || s[k] > '9') {
		k++
	}
	unit, known := units[s[:k]]
	if !known {
		return "", "", 0, "", false
	}
	return whole, frac, unit, s[k:], true
}

// leadingDigits returns how many decimal digits s starts with.
func leadingDigits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// termNanos returns whole.frac units in nanoseconds, with integer
// arithmetic; overflow is set when that exceeds math.MaxInt64.
func termNanos(whole, frac string, unit uint64) (v uint64, overflow bool) {
	const limit = uint64(math.MaxInt64)
	n, over := digits(whole)
	if over || (n > 0 && n > limit/unit) {
		return 0, true
	}
	v = n * unit
	if frac != "" {
		// Exact for the digits that matter: a unit is at most about
		// 6e14 ns, so 15 fraction digits reach below a nanosecond.
		if len(frac) > 15 {
			frac = frac[:15]
		}
		f, _ := digits(frac)
		scale := math.Pow10(len(frac))
		v += uint64(float64(f) * (float64(unit) / scale))
	}
	return v, v > limit
}

// digits reads a run of decimal digits; overflow is set past 2^63.
func digits(s string) (uint64, bool) {
	var n uint64
	for i := 0; i < len(s); i++ {
		if n > (1<<63)/10 {
			return 0, true
		}
		n = n*10 + uint64(s[i]-'0')
		if n > 1<<63 {
			return 0, true
		}
	}
	return n, false
}

// Format prints d the way Parse reads it, using days and weeks where they
// make it shorter.
func Format(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == 0:
		return "0s"
	case d < 0:
		return d.String()
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

// Ints is the accepted range of a whole number.
type Ints struct {
	// Min and Max bound the value, inclusive.
	Min, Max int64
	// Hint, when set, replaces the generic "use MIN to MAX" in errors (for
	// ranges with special values, such as "-1 for no limit").
	Hint string
}

// Common ranges.
var (
	// Int is every int.
	Int = Ints{Min: math.MinInt, Max: math.MaxInt}
	// Int32 is every int32.
	Int32 = Ints{Min: math.MinInt32, Max: math.MaxInt32}
	// NonNegativeInt is 0 to the largest int.
	NonNegativeInt = Ints{Min: 0, Max: math.MaxInt}
	// PositiveInt is 1 to the largest int.
	PositiveInt = Ints{Min: 1, Max: math.MaxInt}
	// PositiveInt32 is 1 to the largest int32.
	PositiveInt32 = Ints{Min: 1, Max: math.MaxInt32}
)

// Range says what the range accepts.
func (r Ints) Range() string {
	if r.Hint != "" {
		return r.Hint
	}
	return fmt.Sprintf("use a whole number from %d to %d", r.Min, r.Max)
}

// Parse reads s as a decimal whole number in r. name says where s came
// from, for the error (see Error.Name).
func (r Ints) Parse(name, s string) (int64, error) {
	in := strings.TrimSpace(s)
	n, err := strconv.ParseInt(in, 10, 64)
	switch {
	case err != nil && len(in) > 0 && len(in) <= maxInput && isInteger(in):
		return 0, &Error{Name: name, Value: s, Problem: "out of range; " + r.Range()}
	case err != nil && r.Hint == "" && r.Min == math.MinInt64 && r.Max == math.MaxInt64:
		return 0, &Error{Name: name, Value: s, Problem: "not a whole number"}
	case err != nil:
		return 0, &Error{Name: name, Value: s, Problem: "not a whole number; " + r.Range()}
	case n < r.Min || n > r.Max:
		return 0, &Error{Name: name, Value: s, Problem: "out of range; " + r.Range()}
	}
	return n, nil
}

// ParseInt is Parse for values that go into an int; r must lie within
// Int.
func (r Ints) ParseInt(name, s string) (int, error) {
	n, err := r.Parse(name, s)
	return int(n), err
}

// isInteger reports whether s is an optionally signed run of digits.
func isInteger(s string) bool {
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
