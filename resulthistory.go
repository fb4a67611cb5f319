package jobq

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// historyPage is how many records one page of an emulated result history
// (driver.ResultLister) holds: what it keeps in memory at once.
const historyPage = 1000

// maxHistoryGroups bounds the error groups an emulated result history
// tracks; the records of further groups are counted in one group whose
// FirstLine is otherErrors.
const maxHistoryGroups = 10000

// otherErrors is the first line of the group that holds the records of
// the error groups past maxHistoryGroups.
const otherErrors = "(other errors)"

// ResultHistory adds up the result records that ended in p's window: the
// records by time bucket, state and runtime, the attempts of their
// histories by outcome and environment, and the dead-lettered ones
// grouped by exit code and first output line (driver.History). Where the
// backend declares result-history native the engine adds them up and
// returns only the sums; where it declares it emulated, the records are
// listed a page at a time (1000, driver.ResultLister) and added up here,
// so memory stays bounded but every record listed is read. Unsupported: an error with code
// Unimplemented.
func (a *Admin) ResultHistory(ctx context.Context, p driver.HistoryParams) (*driver.History, error) {
	const op = "result history"
	q := a.q
	if err := driver.CheckHistoryParams(p); err != nil {
		return nil, &Error{Code: errcode.InvalidArgument, Op: op, Queue: q.url, Err: err}
	}
	var h *driver.History
	var err error
	switch lv := q.caps.Level(driver.ResultHistory); {
	case lv == driver.Native:
		agg, ok := q.drv.(driver.ResultAggregator)
		if !ok {
			return nil, errorf(errcode.Internal, op, "the backend declares %s native but does not add records up (driver.ResultAggregator)", driver.ResultHistory)
		}
		h, err = agg.AggregateResults(ctx, p)
	case lv == driver.Emulated:
		lister, ok := q.drv.(driver.ResultLister)
		if !ok {
			return nil, errorf(errcode.Internal, op, "the backend declares %s emulated but cannot list records (driver.ResultLister)", driver.ResultHistory)
		}
		h, err = scanHistory(ctx, lister, p)
	default:
		return nil, errorf(errcode.Unimplemented, op, "this backend cannot add up its result records: %s", q.caps.Features[driver.ResultHistory].Fallback)
	}
	if err != nil {
		return nil, q.wrap(op, err)
	}
	return h, nil
}

// scanHistory adds up the records of p's window a page at a time: it
// lists the records updated since the window's start (ResultFilter.Since
// is on UpdatedAt, as the window is), and the fold drops those updated at
// or after its end.
func scanHistory(ctx context.Context, lister driver.ResultLister, p driver.HistoryParams) (*driver.History, error) {
	f := newHistoryFold(p)
	cursor := ""
	for {
		recs, next, err := lister.ListResults(ctx, driver.ResultFilter{Since: p.Since}, cursor, historyPage)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			f.add(rec)
		}
		if next == "" {
			return f.history(), nil
		}
		cursor = next
	}
}

// endKey, attemptKey and errorKey are the groups of a historyFold.
type (
	endKey struct {
		bucket, bin int
		state       driver.ResultState
	}
	attemptKey struct {
		bucket       int
		outcome, env string
	}
	errorKey struct {
		code      int
		hasCode   bool
		firstLine string
	}
	errorSums struct {
		count    int64
		last     time.Time
		examples []example
	}
	example struct {
		id string
		at time.Time
	}
)

// historyFold adds up records as driver.History, in memory bounded by
// the number of groups.
type historyFold struct {
	p        driver.HistoryParams
	ends     map[endKey]*driver.EndBin
	attempts map[attemptKey]int64
	errors   map[errorKey]*errorSums
}

func newHistoryFold(p driver.HistoryParams) *historyFold {
	return &historyFold{p: p, ends: map[endKey]*driver.EndBin{}, attempts: map[attemptKey]int64{}, errors: map[errorKey]*errorSums{}}
}

// attemptEnv is the environment an attempt is grouped by: the worker's
// environment label, else its host (as the native aggregates group).
func attemptEnv(a Attempt) string {
	if a.Env != "" {
		return a.Env
	}
	return a.Host
}

// add counts rec when it is a final record of the window; a record whose
// details do not decode is skipped, as the native aggregates skip it.
func (f *historyFold) add(rec *driver.ResultRecord) {
	if !rec.State.Final() || rec.UpdatedAt.Before(f.p.Since) || !rec.UpdatedAt.Before(f.p.Until) {
		return
	}
	r, _, err := decodeRecord(rec)
	if err != nil {
		return
	}
	b := f.p.BucketOf(rec.UpdatedAt)
	k := endKey{bucket: b, bin: -1, state: rec.State}
	var rt time.Duration
	if !r.Started.IsZero() && !r.Finished.IsZero() && !r.Finished.Before(r.Started) {
		rt = r.Finished.Sub(r.Started)
		k.bin = driver.RuntimeBin(rt)
	}
	e := f.ends[k]
	if e == nil {
		e = &driver.EndBin{Bucket: b, State: rec.State, RuntimeBin: k.bin}
		f.ends[k] = e
	}
	e.Count++
	e.MaxRuntime = max(e.MaxRuntime, rt)
	for _, a := range r.Attempts {
		if a.Outcome == OutcomeSuccess {
			continue
		}
		at := a.End
		if at.IsZero() {
			at = rec.UpdatedAt
		}
		f.attempts[attemptKey{bucket: f.p.BucketOf(at), outcome: string(a.Outcome), env: attemptEnv(a)}]++
	}
	if rec.State == driver.ResultDeadLettered {
		f.addError(rec, r)
	}
}

// addError counts a dead-lettered record in its error group.
func (f *historyFold) addError(rec *driver.ResultRecord, r *Result) {
	k := errorKey{firstLine: driver.FirstLine(r.Output, r.Error)}
	if r.ExitCode != nil {
		k.code, k.hasCode = *r.ExitCode, true
	}
	g := f.errors[k]
	if g == nil {
		if len(f.errors) >= maxHistoryGroups {
			k = errorKey{firstLine: otherErrors}
			g = f.errors[k]
		}
		if g == nil {
			g = &errorSums{}
			f.errors[k] = g
		}
	}
	g.count++
	if rec.UpdatedAt.After(g.last) {
		g.last = rec.UpdatedAt
	}
	if f.p.Examples == 0 || slices.ContainsFunc(g.examples, func(x example) bool { return x.id == rec.ID }) {
		return
	}
	// The most recent first, then by ID: the order does not depend on
	// the order the backend lists its records in.
	g.examples = append(g.examples, example{id: rec.ID, at: rec.UpdatedAt})
	sort.Slice(g.examples, func(i, j int) bool {
		a, b := g.examples[i], g.examples[j]
		if !a.at.Equal(b.at) {
			return a.at.After(b.at)
		}
		return a.id < b.id
	})
	if len(g.examples) > f.p.Examples {
		g.examples = g.examples[:f.p.Examples]
	}
}

// history returns the sums.
func (f *historyFold) history() *driver.History {
	h := &driver.History{}
	for _, e := range f.ends {
		h.Ends = append(h.Ends, *e)
	}
	for k, n := range f.attempts {
		h.Attempts = append(h.Attempts, driver.AttemptBin{Bucket: k.bucket, Outcome: k.outcome, Env: k.env, Count: n})
	}
	for k, g := range f.errors {
		eg := driver.ErrorGroup{FirstLine: k.firstLine, Count: g.count, Last: g.last}
		if k.hasCode {
			code := k.code
			eg.ExitCode = &code
		}
		for _, x := range g.examples {
			eg.Examples = append(eg.Examples, x.id)
		}
		h.Errors = append(h.Errors, eg)
	}
	sort.Slice(h.Errors, func(i, j int) bool {
		if h.Errors[i].Count != h.Errors[j].Count {
			return h.Errors[i].Count > h.Errors[j].Count
		}
		return h.Errors[i].Last.After(h.Errors[j].Last)
	})
	if len(h.Errors) > f.p.ErrorGroups {
		h.Errors = h.Errors[:f.p.ErrorGroups]
	}
	return h
}
