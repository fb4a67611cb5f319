package driver

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bound"
)

// Params reads a driver's URL query parameters and remembers which ones it
// used, so that Done can reject the rest. Typical use:
//
//	p := driver.NewParams(u)
//	queue := p.String("queue", "default")
//	poll := p.Duration("poll", time.Second)
//	if err := p.Done(); err != nil {
//		return nil, err
//	}
type Params struct {
	q    url.Values
	used map[string]bool
	errs []string
}

// NewParams starts reading u's query.
func NewParams(u *url.URL) *Params {
	return &Params{q: u.Query(), used: map[string]bool{}}
}

// Has reports whether the parameter is present, and marks it used.
func (p *Params) Has(name string) bool {
	p.used[name] = true
	_, ok := p.q[name]
	return ok
}

// String returns the parameter's value, or def when it is absent.
func (p *Params) String(name, def string) string {
	p.used[name] = true
	if v, ok := p.q[name]; ok && len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// Int returns the parameter as an integer, or def when it is absent. A
// malformed value, or one that does not fit an int, is recorded and reported
// by Done.
func (p *Params) Int(name string, def int) int {
	return p.IntIn(name, def, math.MinInt, math.MaxInt)
}

// IntIn is Int for values that must lie in min..max (inclusive); a value
// outside is recorded, with the range, and reported by Done.
func (p *Params) IntIn(name string, def, min, max int) int {
	s := p.String(name, "")
	if s == "" {
		return def
	}
	n, err := bound.Ints{Min: int64(min), Max: int64(max)}.ParseInt("query parameter "+name, s)
	if err != nil {
		p.errs = append(p.errs, err.Error())
		return def
	}
	return n
}

// Duration returns the parameter as a duration ("500ms", "2s", "1h30m",
// "2d"; a number needs a unit unless it is 0), or def when it is absent. A
// malformed, negative or overflowing value is recorded and reported by Done.
func (p *Params) Duration(name string, def time.Duration) time.Duration {
	return p.DurationIn(name, def, 0, bound.MaxDuration)
}

// DurationIn is Duration for values that must lie in min..max (inclusive).
func (p *Params) DurationIn(name string, def, min, max time.Duration) time.Duration {
	s := p.String(name, "")
	if s == "" {
		return def
	}
	d, err := bound.Durations{Min: min, Max: max}.Parse("query parameter "+name, s)
	if err != nil {
		p.errs = append(p.errs, err.Error())
		return def
	}
	return d
}

// Bool returns the parameter as a boolean ("true", "false", "1", "0"), or def
// when it is absent.
func (p *Params) Bool(name string, def bool) bool {
	s := p.String(name, "")
	if s == "" {
		return def
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		p.errs = append(p.errs, fmt.Sprintf("query parameter %s=%q is not true or false", name, s))
		return def
	}
	return b
}

// Fail records a problem with a parameter's value, reported by Done.
func (p *Params) Fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

// Done returns an InvalidArgument error naming every parameter that was not
// read and every malformed value, or nil.
func (p *Params) Done() error {
	var unknown []string
	for k := range p.q {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	msgs := append([]string(nil), p.errs...)
	if len(unknown) > 0 {
		known := make([]string, 0, len(p.used))
		for k := range p.used {
			known = append(known, k)
		}
		sort.Strings(known)
		msgs = append(msgs, fmt.Sprintf("unknown query parameter %s (this backend accepts: %s)",
			strings.Join(unknown, ", "), strings.Join(known, ", ")))
	}
	if len(msgs) == 0 {
		return nil
	}
	return &Error{Code: errcode.InvalidArgument, Msg: strings.Join(msgs, "; ")}
}

// Priority bounds of a task (Task.Priority, Message.Priority). Higher
// priorities are received first on backends whose Priority feature is
// native; a backend may clamp a stored value to this range.
const (
	MinPriority = -1000
	MaxPriority = 1000
)
