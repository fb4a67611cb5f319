package driver

import (
	"context"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq/errcode"
)

// Result history: what the result records of a time window add up to, for
// the dashboard's history panels (completions, failures and runtimes per
// bucket of time, attempts by outcome and environment, and the errors
// grouped by exit code and first output line). A driver declares it with
// the ResultHistory feature:
//
//   - Native: it implements ResultAggregator, which adds the records up in
//     the engine (a GROUP BY) and returns only the sums;
//   - Emulated: it implements ResultLister (the listing that exports
//     records); the portable layer lists the records updated since the
//     window's start (ResultFilter.Since) a page at a time, and decodes
//     and adds up each page, so memory stays bounded by the page size,
//     but every record listed crosses the wire (every record kept, where
//     the engine cannot apply Since);
//   - Unsupported: neither (the backend keeps no records, or cannot list
//     them).
//
// Both read the records whose UpdatedAt (when the task ended, for a
// record written at its settlement) is in [Since, Until). A native
// aggregator may serve a Rollable window from sums it keeps per slot
// (rollup.go: Rollup, FoldRollup), as long as it returns what adding up
// the records returns.

// MaxHistoryBuckets bounds the buckets of one aggregate: (Until-Since) /
// Bucket.
const MaxHistoryBuckets = 5000

// HistoryParams selects what a result history adds up.
type HistoryParams struct {
	// Since and Until bound the records' UpdatedAt: [Since, Until).
	Since, Until time.Time
	// Bucket is the width of a time bucket; buckets start at Since.
	Bucket time.Duration
	// Examples is how many task IDs each error group lists (the most
	// recent first).
	Examples int
	// ErrorGroups is how many error groups to return at most (the largest
	// first).
	ErrorGroups int
}

// History is what the records of a window add up to. Each list is in
// no particular order; a bin or group with a zero count is left out.
type History struct {
	// Ends counts the records by bucket, state and runtime bin.
	Ends []EndBin
	// Attempts counts the attempts the records' attempt histories list
	// (not the success a succeeded record implies) by bucket, outcome and
	// environment.
	Attempts []AttemptBin
	// Errors groups the dead-lettered records by exit code and first
	// output line.
	Errors []ErrorGroup
}

// EndBin counts the records that ended in one bucket in one state with a
// runtime in one bin.
type EndBin struct {
	// Bucket is the bucket's index: it starts at Since + Bucket*index.
	Bucket int
	State  ResultState
	// RuntimeBin is RuntimeBin of the record's runtime (finished minus
	// started); -1 when the record has no start or finish.
	RuntimeBin int
	Count      int64
	// MaxRuntime is the longest runtime among them.
	MaxRuntime time.Duration
}

// AttemptBin counts the recorded attempts of one outcome in one
// environment whose end (or, when it is unknown, whose record's UpdatedAt)
// is in one bucket.
type AttemptBin struct {
	Bucket  int
	Outcome string
	// Env is the attempt's environment label where it has one, else its
	// host; empty when neither is known (a lease that expired).
	Env   string
	Count int64
}

// ErrorGroup is the dead-lettered records that share an exit code and a
// first output line.
type ErrorGroup struct {
	// ExitCode is the shell command's exit status; nil when there is none.
	ExitCode *int
	// FirstLine is the first line of the output tail that is not blank
	// (of the error when the output is empty), cut to MaxFirstLine bytes.
	FirstLine string
	Count     int64
	// Last is the UpdatedAt of the group's most recent record.
	Last time.Time
	// Examples are task IDs of the group, most recent first.
	Examples []string
}

// MaxFirstLine bounds ErrorGroup.FirstLine.
const MaxFirstLine = 120

// ResultAggregator is implemented by drivers that add up a window of
// result records in their engine (ResultHistory Native). The records'
// details are the portable layer's encoding (a JSON object; see
// resultrecord.go in package jobq): the aggregate reads its members
// "started", "finished", "exit_code", "output", "error" and "attempts"
// (each attempt's "outcome", "env", "host" and "end"), and must treat a
// member that is missing or of another type as unknown, never fail on it.
type ResultAggregator interface {
	// AggregateResults adds up the records of p's window. It may be called
	// concurrently.
	AggregateResults(ctx context.Context, p HistoryParams) (*History, error)
}

// runtimeBinBase is the upper bound of runtime bin 0.
const runtimeBinBase = 100 * time.Millisecond

// MaxRuntimeBin is the last runtime bin: everything longer than about 30
// hours.
const MaxRuntimeBin = 40

// RuntimeBin is the runtime bin of d: 0 below 100 ms, then bins half an
// octave wide (bin k holds [100ms·2^((k-1)/2), 100ms·2^(k/2))), up to
// MaxRuntimeBin. The SQL aggregates compute the same.
func RuntimeBin(d time.Duration) int {
	if d < runtimeBinBase {
		return 0
	}
	k := int(math.Floor(2*math.Log2(float64(d)/float64(runtimeBinBase)))) + 1
	return min(k, MaxRuntimeBin)
}

// RuntimeBinBounds returns the bounds [lo, hi) of runtime bin k.
func RuntimeBinBounds(k int) (lo, hi time.Duration) {
	at := func(k int) time.Duration {
		return time.Duration(float64(runtimeBinBase) * math.Pow(2, float64(k-1)/2))
	}
	if k <= 0 {
		return 0, runtimeBinBase
	}
	return at(k), at(k + 1)
}

// FirstLine is ErrorGroup.FirstLine of a record with output tail output
// and error text errText: the first line that is not blank of the output
// (of errText when the output is blank), without its surrounding blanks,
// cut to MaxFirstLine characters. The SQL aggregates compute the same.
func FirstLine(output, errText string) string {
	const blanks = " \t\r\n"
	s := strings.TrimLeft(output, blanks)
	if s == "" {
		s = strings.TrimLeft(errText, blanks)
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, blanks)
	if utf8.RuneCountInString(s) > MaxFirstLine {
		s = string([]rune(s)[:MaxFirstLine])
	}
	return s
}

// CheckHistoryParams checks p: a window that ends after it starts, a
// positive bucket, at most MaxHistoryBuckets buckets, and counts that are
// not negative.
func CheckHistoryParams(p HistoryParams) error {
	switch {
	case !p.Until.After(p.Since):
		return Errorf(errcode.InvalidArgument, "result history: the window ends (%s) before it starts (%s)", p.Until.Format(time.RFC3339), p.Since.Format(time.RFC3339))
	case p.Bucket < time.Second:
		return Errorf(errcode.InvalidArgument, "result history: bucket %v is shorter than a second", p.Bucket)
	case p.Until.Sub(p.Since)/p.Bucket >= MaxHistoryBuckets:
		return Errorf(errcode.InvalidArgument, "result history: %v in buckets of %v is more than %d buckets; use wider buckets", p.Until.Sub(p.Since), p.Bucket, MaxHistoryBuckets)
	case p.Examples < 0 || p.ErrorGroups < 0:
		return Errorf(errcode.InvalidArgument, "result history: examples (%d) and error groups (%d) cannot be negative", p.Examples, p.ErrorGroups)
	}
	return nil
}

// NumBuckets is the number of buckets of p's window (the last may be
// partial).
func (p HistoryParams) NumBuckets() int {
	return int((p.Until.Sub(p.Since) + p.Bucket - 1) / p.Bucket)
}

// BucketOf is the bucket of time t, clamped to the window's buckets.
func (p HistoryParams) BucketOf(t time.Time) int {
	b := int(t.Sub(p.Since) / p.Bucket)
	return max(0, min(b, p.NumBuckets()-1))
}
