package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/bound"
	"github.com/jobq/jobq/internal/hooks"
)

// ParseDuration parses a duration in Go syntax extended with days and weeks
// ("90s", "10m", "1h30m", "2d", "1w", "1d12h"). A bare number is seconds,
// as in ai4s-jobq's environment variables ("600"). Negative, NaN, infinite
// and out-of-range (over about 292 years) durations are rejected.
func ParseDuration(s string) (time.Duration, error) {
	d, err := bound.NonNegative.Parse("", s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: %w", s, err)
	}
	return d, nil
}

// formatDuration prints d the way ParseDuration reads it, using days and
// weeks where they make it shorter.
func formatDuration(d time.Duration) string { return bound.Format(d) }

// durationValue is a pflag.Value for a duration flag within a range. pflag
// names the flag in its error.
type durationValue struct {
	d *time.Duration
	r bound.Durations
}

// durationFlag is a durationValue for every duration from 0 on.
func durationFlag(d *time.Duration) durationValue {
	return durationValue{d: d, r: bound.NonNegative}
}

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0" // what pflag takes for "no default worth showing"
	}
	return formatDuration(*v.d)
}

func (v durationValue) Set(s string) error {
	r := v.r
	r.BareSeconds = true
	d, err := r.Parse("", s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v durationValue) Type() string { return "duration" }

// countValue is a pflag.Value for a whole-number flag within a range.
type countValue struct {
	n *int
	r bound.Ints
}

func (v countValue) String() string {
	if v.n == nil {
		return "0"
	}
	return strconv.Itoa(*v.n)
}

func (v countValue) Set(s string) error {
	n, err := v.r.ParseInt("", s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

func (v countValue) Type() string { return "int" }

// countFlag defines a whole-number flag that accepts only values in r.
func countFlag(fl *pflag.FlagSet, p *int, name, short string, def int, r bound.Ints, usage string) {
	*p = def
	fl.VarP(countValue{n: p, r: r}, name, short, usage)
}

// durationRangeFlag defines a duration flag that accepts only values in r
// (a bare number being seconds).
func durationRangeFlag(fl *pflag.FlagSet, p *time.Duration, name string, def time.Duration, r bound.Durations, usage string) {
	*p = def
	fl.Var(durationValue{d: p, r: r}, name, usage)
}

// The ranges of the count and duration flags.
var (
	// countRange: how many (tasks, workers, dead letters).
	countRange = bound.PositiveInt32
	// retriesRange: --num-retries.
	retriesRange = bound.Ints{Min: 0, Max: math.MaxInt32}
	// priorityRange: --priority.
	priorityRange = bound.Ints{Min: driver.MinPriority, Max: driver.MaxPriority}
	// prefetchRange: --prefetch.
	prefetchRange = bound.Ints{Min: 0, Max: math.MaxInt32}
	// maxConsecutiveRange: --max-consecutive-failures, where -1 means no
	// limit and 0 is refused by fromEnv.
	maxConsecutiveRange = bound.Ints{Min: -1, Max: math.MaxInt32,
		Hint: "use 1 or more (the worker stops when more task attempts than this fail in a row), or -1 for no limit"}
	// maxLostLeasesRange: --max-lost-leases, where -1 means no limit.
	maxLostLeasesRange = bound.Ints{Min: -1, Max: math.MaxInt32,
		Hint: "use 1 or more (a task whose lease expired on this many deliveries in a row is dead-lettered), or -1 for no limit"}
	// visibilityRange: --visibility-timeout.
	visibilityRange = bound.Durations{Min: time.Second}
	// killTimeoutRange: worker --kill-timeout and $JOBQ_KILL_TIMEOUT (the
	// shell and the stop read 0 as their default and no bound).
	killTimeoutRange = bound.Durations{Min: time.Millisecond, BareSeconds: true}
	// taskTimeLimitRange: push --time-limit, worker --task-time-limit.
	taskTimeLimitRange = bound.Durations{Max: driver.MaxPolicyDuration}
	// snoozeDelayRange: worker --snooze-delay (a requeue's delay).
	snoozeDelayRange = bound.Durations{Max: driver.MaxPolicyDuration}
	// uniqueForRange: push --unique-for (a look-back over result records).
	uniqueForRange = bound.Durations{Max: driver.MaxPolicyDuration}
)

// backoffValue is a pflag.Value for a retry backoff written BASE,CAP (for
// example 10s,1h) or BASE alone, as the library reads it.
type backoffValue struct{ b *jobq.Backoff }

func (v backoffValue) String() string {
	if v.b == nil || v.b.IsZero() {
		return ""
	}
	return v.b.String()
}

func (v backoffValue) Set(s string) error {
	b, err := hooks.ParseBackoff(s)
	var je *jobq.Error
	if errors.As(err, &je) && je.Msg != "" {
		// pflag names the flag; the library's own prefix ("jobq policy:",
		// as `policy set retry-backoff` says it) would point elsewhere.
		return errors.New(je.Msg)
	}
	if err != nil {
		return err
	}
	*v.b = b.(jobq.Backoff)
	return nil
}

func (v backoffValue) Type() string { return "base,cap" }
