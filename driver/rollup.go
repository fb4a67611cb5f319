package driver

import (
	"context"
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// Result rollups: a backend that declares result-history native may keep
// what its records add up to per slot of time (RollupSlot), so that a
// history window reads a few rows per slot instead of every record. The
// sums of a slot are a Rollup; FoldRollup turns the rollups of a window's
// slots into the History that adding up the records themselves returns.
// A window can be served from rollups when Rollable says so (its edges
// and buckets fall on slot boundaries); the backend recomputes a slot's
// rollup whenever its records changed since it was kept, so that the
// numbers are the same either way.

// RollupSlot is the width of a rollup slot. Slots start at whole multiples
// of it since the Unix epoch (in UTC).
const RollupSlot = 10 * time.Minute

// RollupExamples is how many task IDs a rollup keeps per error group and
// slot (the most recent): windows that ask for more are added up from
// the records.
const RollupExamples = 5

// Rollup is what some records add up to, by the slot of their UpdatedAt:
// the parts of History with absolute slots instead of window buckets.
type Rollup struct {
	Ends     []RollupEnd     `json:"ends,omitempty"`
	Attempts []RollupAttempt `json:"attempts,omitempty"`
	Errors   []RollupError   `json:"errors,omitempty"`
}

// RollupEnd is EndBin by slot.
type RollupEnd struct {
	Slot       int64         `json:"slot"`
	State      ResultState   `json:"state"`
	RuntimeBin int           `json:"bin"`
	Count      int64         `json:"n"`
	MaxRuntime time.Duration `json:"max"`
}

// RollupAttempt is AttemptBin by the slot of the record and the slot of
// the attempt's end (the record's slot when the end is unknown).
type RollupAttempt struct {
	Slot        int64  `json:"slot"`
	AttemptSlot int64  `json:"at"`
	Outcome     string `json:"outcome"`
	Env         string `json:"env"`
	Count       int64  `json:"n"`
}

// RollupError is ErrorGroup by slot, with up to RollupExamples examples,
// most recent first.
type RollupError struct {
	Slot      int64           `json:"slot"`
	ExitCode  *int            `json:"code,omitempty"`
	FirstLine string          `json:"line"`
	Count     int64           `json:"n"`
	Last      time.Time       `json:"last"`
	Examples  []RollupExample `json:"examples,omitempty"`
}

// RollupExample is one example task of an error group and its record's
// UpdatedAt.
type RollupExample struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// SlotOf is the rollup slot of t.
func SlotOf(t time.Time) int64 {
	us, w := t.UnixMicro(), RollupSlot.Microseconds()
	s := us / w
	if us%w < 0 {
		s--
	}
	return s
}

// SlotStart is when slot s starts.
func SlotStart(s int64) time.Time {
	return time.UnixMicro(s * RollupSlot.Microseconds()).UTC()
}

// Rollable reports whether p's window can be served from rollups: its
// edges are slot boundaries, its bucket a whole number of slots, and it
// asks for no more examples than a rollup keeps.
func (p HistoryParams) Rollable() bool {
	w := RollupSlot.Microseconds()
	return p.Since.UnixMicro()%w == 0 && p.Until.UnixMicro()%w == 0 && p.Bucket%RollupSlot == 0 &&
		p.Examples <= RollupExamples && p.Since.Nanosecond()%1000 == 0 && p.Until.Nanosecond()%1000 == 0
}

// Slots returns the slots of p's window, [first, last).
func (p HistoryParams) Slots() (first, last int64) {
	return SlotOf(p.Since), SlotOf(p.Until)
}

// Add appends o's rows to r.
func (r *Rollup) Add(o *Rollup) {
	if o == nil {
		return
	}
	r.Ends = append(r.Ends, o.Ends...)
	r.Attempts = append(r.Attempts, o.Attempts...)
	r.Errors = append(r.Errors, o.Errors...)
}

// Within returns the rows of r whose record slot is in [first, last).
func (r *Rollup) Within(first, last int64) *Rollup {
	in := func(s int64) bool { return s >= first && s < last }
	out := &Rollup{}
	for _, e := range r.Ends {
		if in(e.Slot) {
			out.Ends = append(out.Ends, e)
		}
	}
	for _, a := range r.Attempts {
		if in(a.Slot) {
			out.Attempts = append(out.Attempts, a)
		}
	}
	for _, e := range r.Errors {
		if in(e.Slot) {
			out.Errors = append(out.Errors, e)
		}
	}
	return out
}

// bucketOfSlot is the bucket of p (a Rollable window) that slot s falls
// in, clamped to the window's buckets as BucketOf clamps.
func (p HistoryParams) bucketOfSlot(s int64) int {
	return p.BucketOf(SlotStart(s))
}

// errKey identifies an error group across slots.
type errKey struct {
	code      int
	hasCode   bool
	firstLine string
}

// FoldRollup adds up the rollup rows of p's window (a Rollable one; rows
// of other slots are left out) as the History that adding up the window's
// records returns.
func FoldRollup(p HistoryParams, r *Rollup) *History {
	first, last := p.Slots()
	r = r.Within(first, last)
	type endKey struct {
		bucket, bin int
		state       ResultState
	}
	ends := map[endKey]*EndBin{}
	for _, e := range r.Ends {
		k := endKey{p.bucketOfSlot(e.Slot), e.RuntimeBin, e.State}
		b := ends[k]
		if b == nil {
			b = &EndBin{Bucket: k.bucket, State: e.State, RuntimeBin: e.RuntimeBin}
			ends[k] = b
		}
		b.Count += e.Count
		b.MaxRuntime = max(b.MaxRuntime, e.MaxRuntime)
	}
	type attKey struct {
		bucket       int
		outcome, env string
	}
	atts := map[attKey]int64{}
	for _, a := range r.Attempts {
		atts[attKey{p.bucketOfSlot(a.AttemptSlot), a.Outcome, a.Env}] += a.Count
	}
	h := &History{}
	for _, b := range ends {
		h.Ends = append(h.Ends, *b)
	}
	for k, n := range atts {
		h.Attempts = append(h.Attempts, AttemptBin{Bucket: k.bucket, Outcome: k.outcome, Env: k.env, Count: n})
	}
	h.Errors = foldErrors(p, r.Errors)
	return h
}

// foldErrors merges the error groups of several slots: the largest
// p.ErrorGroups groups (then the most recent), each with its p.Examples
// most recent examples.
func foldErrors(p HistoryParams, rows []RollupError) []ErrorGroup {
	if p.ErrorGroups == 0 {
		return nil
	}
	type group struct {
		g        ErrorGroup
		examples []RollupExample
	}
	groups := map[errKey]*group{}
	for _, e := range rows {
		k := errKey{firstLine: e.FirstLine}
		if e.ExitCode != nil {
			k.code, k.hasCode = *e.ExitCode, true
		}
		g := groups[k]
		if g == nil {
			g = &group{g: ErrorGroup{FirstLine: e.FirstLine}}
			if e.ExitCode != nil {
				code := *e.ExitCode
				g.g.ExitCode = &code
			}
			groups[k] = g
		}
		g.g.Count += e.Count
		if e.Last.After(g.g.Last) {
			g.g.Last = e.Last
		}
		g.examples = append(g.examples, e.Examples...)
	}
	out := make([]ErrorGroup, 0, len(groups))
	for _, g := range groups {
		sort.SliceStable(g.examples, func(i, j int) bool { return g.examples[i].At.After(g.examples[j].At) })
		for _, x := range g.examples[:min(len(g.examples), p.Examples)] {
			g.g.Examples = append(g.g.Examples, x.ID)
		}
		out = append(out, g.g)
	}
	slices.SortStableFunc(out, func(a, b ErrorGroup) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return b.Last.Compare(a.Last)
	})
	return out[:min(len(out), p.ErrorGroups)]
}

// RollupFiller is implemented by a backend that keeps rollups: FillRollups
// adds up the closed slots (or generations) of records that have no
// rollup yet and keeps them, so that the next history reads them instead
// of the records. It first checks whether the latest closed slot is
// rolled up (an indexed read) and returns 0 at once when it is; else it
// reports how many slots (or generations) it added up. Workers call it
// off the task path (worker.Options.NoHistoryRollups); several callers at
// once are safe (the rollups are upserted, and a backend may let only one
// of them work).
type RollupFiller interface {
	FillRollups(ctx context.Context) (int, error)
}

// RollupFillBack is how far back a fill adds up slots that have no
// rollup: the dashboard's longest window.
const RollupFillBack = 7 * 24 * time.Hour

// RollupFillGrace is how long after a slot ends a fill waits before it
// rolls the slot up, for records stamped by clocks a little behind.
const RollupFillGrace = time.Minute

// RollupFill runs a backend's background fill at most once at a time, and
// counts the slots (or generations) that history reads had to add up from
// their records although they had ended (tests read it to tell that a
// window was served from rollups).
type RollupFill struct {
	running atomic.Bool
	// ReadAddedUp counts the closed slots (Postgres) or generations
	// (SQLite) that history reads added up from their records.
	ReadAddedUp atomic.Int64
}

// Later runs fill in a goroutine of its own unless one runs already; its
// context ends when done is closed. It reports whether it started one.
func (f *RollupFill) Later(done <-chan struct{}, fill func(context.Context)) bool {
	if !f.running.CompareAndSwap(false, true) {
		return false
	}
	go func() {
		defer f.running.Store(false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-done:
				cancel()
			case <-ctx.Done():
			}
		}()
		fill(ctx)
	}()
	return true
}

// Running reports whether a fill started by Later is running.
func (f *RollupFill) Running() bool { return f.running.Load() }
