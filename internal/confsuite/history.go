package confsuite

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// historyChecks are the checks of the result history (the result-history
// feature). Keep docs/conformance.md in step.
func historyChecks() []check {
	return []check{
		{"ResultHistory", checkResultHistory},
	}
}

// historyWant is what checkResultHistory expects the window to add up to.
type historyWant struct {
	ends     map[endAt]int64 // records by bucket and state
	slow     int64           // succeeded records in the runtime bin of historySlow
	requeued map[string]int64
	errors   int64 // dead-lettered records in the group of exit code 3 and "boom"
}

// endAt is a bucket and a state of the records a history counts.
type endAt struct {
	bucket int
	state  driver.ResultState
}

// historySlow is the runtime of the slow tasks of checkResultHistory.
const historySlow = 3 * time.Second

// historyHost is the host of the requeued attempts; historyEnv the
// environment label of one of them, which groups it instead of its host.
const (
	historyHost = "history-host"
	historyEnv  = "history-env"
)

// checkResultHistory: the window's records add up, natively or by a scan,
// to what was settled: the ends by second and state and by runtime bin,
// the recorded attempts by outcome and environment label, else host
// (where messages keep attempt histories), and the dead letters grouped
// by exit code and first output line, with their task IDs as examples.
// The windows an hour before and an hour after hold none of them. An
// unsupported declaration fails with Unimplemented.
func checkResultHistory(c *C) {
	q := c.open()
	c.needResults(q)
	began := time.Now().Truncate(time.Second)
	// Buckets of a second, so the per-bucket counts are checked against
	// each record's UpdatedAt (Result.Recorded).
	p := driver.HistoryParams{Since: began.Add(-time.Minute), Until: began.Add(time.Hour), Bucket: time.Second, Examples: 2, ErrorGroups: 10}
	if level(q, driver.ResultHistory) == driver.Unsupported {
		_, err := q.Admin().ResultHistory(c.ctx(), p)
		c.expectCode(err, errcode.Unimplemented, "ResultHistory on a backend without result-history")
		c.skipNeeds("driver.ResultAggregator or driver.ResultLister (feature result-history)", "result-history is unsupported: "+q.Capabilities().Features[driver.ResultHistory].Fallback)
	}
	_, err := q.Admin().ResultHistory(c.ctx(), driver.HistoryParams{Since: p.Since, Until: p.Since, Bucket: time.Minute})
	c.expectCode(err, errcode.InvalidArgument, "ResultHistory of an empty window")
	want, dead := c.settleForHistory(q, p)
	var h *driver.History
	if !c.poll(func() bool {
		h, err = q.Admin().ResultHistory(c.ctx(), p)
		return err == nil && historyMatches(h, want, dead) == ""
	}) {
		if err != nil {
			c.Fatalf("ResultHistory: %v", err)
		}
		c.Fatalf("ResultHistory: %s", historyMatches(h, want, dead))
	}
	for _, w := range []struct {
		what        string
		since, till time.Time
	}{
		{"the hour before the tasks ended", began.Add(-2 * time.Hour), began.Add(-time.Hour)},
		{"the hour after", began.Add(2 * time.Hour), began.Add(3 * time.Hour)},
	} {
		h, err := q.Admin().ResultHistory(c.ctx(), driver.HistoryParams{Since: w.since, Until: w.till, Bucket: time.Minute, Examples: 2, ErrorGroups: 10})
		switch {
		case err != nil:
			c.Fatalf("ResultHistory of %s: %v", w.what, err)
		case len(h.Ends)+len(h.Attempts)+len(h.Errors) != 0:
			c.Errorf("ResultHistory of %s: %+v; want nothing (the records are outside it)", w.what, *h)
		}
	}
	// The dashboard's window (whole hours: served from rollups where the
	// backend keeps them), twice: the first fills them, the second reads
	// them back.
	until := time.Now().Truncate(time.Hour).Add(time.Hour)
	dash := driver.HistoryParams{Since: until.Add(-24 * time.Hour), Until: until, Bucket: time.Hour, Examples: 2, ErrorGroups: 10}
	dashWant := rebucket(want, p, dash)
	for run := range 2 {
		h, err = q.Admin().ResultHistory(c.ctx(), dash)
		if err != nil {
			c.Fatalf("ResultHistory of the last 24 hours (run %d): %v", run+1, err)
		}
		if msg := historyMatches(h, dashWant, dead); msg != "" {
			c.Fatalf("ResultHistory of the last 24 hours (run %d): %s", run+1, msg)
		}
	}
}

// settleForHistory ends tasks in every way the history counts, and
// returns what p's window must add up to and the dead-lettered task IDs.
func (c *C) settleForHistory(q *handle, p driver.HistoryParams) (historyWant, map[string]bool) {
	want := historyWant{ends: map[endAt]int64{}, requeued: map[string]int64{}}
	deadLetters := level(q, driver.DeadLetter) != driver.Unsupported
	attempts := level(q, driver.InPlaceUpdate) == driver.Native
	n := 5
	var tasks []*jobq.Task
	for i := range n {
		t := task(fmt.Sprint("history ", i))
		t.Metadata = map[string]string{"check": "history"} // schema v2, which keeps attempts on every backend
		tasks = append(tasks, t)
	}
	c.push(q, tasks...)
	if attempts {
		// Two tasks are stopped once before they succeed: one on a worker
		// with an environment label, one on a worker without.
		envs := []string{historyEnv, ""}
		for _, e := range c.receiveAll(q, 2, c.longVis(q)) {
			env := envs[0]
			envs = envs[1:]
			hooks.RecordAttempt(e, jobq.Attempt{Worker: "history-worker", Host: historyHost, Env: env, Start: time.Now(), End: time.Now(), Outcome: jobq.OutcomeRequeued})
			if err := e.Requeue(c.ctx(), 0); err != nil {
				c.Fatalf("requeue: %v", err)
			}
			want.requeued[cmp.Or(env, historyHost)]++
		}
	}
	dead := map[string]bool{}
	states := map[string]driver.ResultState{}
	code := 3
	i := 0
	for id, e := range c.receiveAll(q, n, c.longVis(q)) {
		var err error
		switch {
		case i < 2:
			hooks.RecordAttempt(e, jobq.Attempt{Worker: "history-worker", Host: "h", Start: time.Now().Add(-historySlow), Outcome: jobq.OutcomeSuccess})
			err = e.Complete(c.ctx())
			want.slow++
		case i == 2 || !deadLetters:
			err = e.Complete(c.ctx())
		default:
			e.SetResult(jobq.ResultDetails{ExitCode: &code, Output: "\n  boom\nsecond line"})
			err = e.DeadLetter(c.ctx(), "history reason", "")
			want.errors++
			dead[id] = true
		}
		if err != nil {
			c.Fatalf("settle: %v", err)
		}
		states[id] = driver.ResultSucceeded
		if dead[id] {
			states[id] = driver.ResultDeadLettered
		}
		i++
	}
	// Each record counts in the bucket of its UpdatedAt.
	for id, st := range states {
		var r *jobq.Result
		if !c.poll(func() bool {
			var err error
			r, err = q.Result(c.ctx(), id)
			return err == nil && r.State == st
		}) {
			c.Fatalf("the record of %s is not %s: %+v", id, st, r)
		}
		want.ends[endAt{p.BucketOf(r.Recorded), st}]++
	}
	return want, dead
}

// historyMatches says how h differs from want ("" when it does not).
// rebucket is want, whose ends are counted in the buckets of window p,
// counted in the buckets of window to instead.
func rebucket(want historyWant, p, to driver.HistoryParams) historyWant {
	out := want
	out.ends = make(map[endAt]int64, len(want.ends))
	for k, n := range want.ends {
		at := p.Since.Add(time.Duration(k.bucket) * p.Bucket)
		out.ends[endAt{int(at.Sub(to.Since) / to.Bucket), k.state}] += n
	}
	return out
}

func historyMatches(h *driver.History, want historyWant, dead map[string]bool) string {
	got := historyWant{ends: map[endAt]int64{}, requeued: map[string]int64{}}
	slowBin := driver.RuntimeBin(historySlow)
	for _, e := range h.Ends {
		got.ends[endAt{e.Bucket, e.State}] += e.Count
		if e.State == driver.ResultSucceeded && e.RuntimeBin == slowBin {
			got.slow += e.Count
			// Engines keep times to the microsecond or millisecond: the
			// runtime may come out a little under the 3 s it was.
			if e.MaxRuntime < historySlow-50*time.Millisecond || e.MaxRuntime > historySlow+time.Minute {
				return fmt.Sprintf("the slow tasks' max runtime is %v; want about %v", e.MaxRuntime, historySlow)
			}
		}
	}
	for _, a := range h.Attempts {
		if a.Outcome == string(jobq.OutcomeRequeued) {
			got.requeued[a.Env] += a.Count
		}
	}
	for _, g := range h.Errors {
		if g.ExitCode != nil && *g.ExitCode == 3 && g.FirstLine == "boom" {
			got.errors += g.Count
			if err := examplesOf(g, dead); err != nil {
				return err.Error()
			}
		}
	}
	if fmt.Sprint(got.ends) != fmt.Sprint(want.ends) || got.slow != want.slow || fmt.Sprint(got.requeued) != fmt.Sprint(want.requeued) || got.errors != want.errors {
		return fmt.Sprintf("ends (bucket, state) %v, %d slow (%v), requeued attempts by environment %v, %d errors (exit 3, \"boom\"); want ends %v, %d slow, requeued %v, %d errors (history %+v)",
			got.ends, got.slow, historySlow, got.requeued, got.errors, want.ends, want.slow, want.requeued, want.errors, *h)
	}
	return ""
}

// examplesOf checks that g's examples are dead-lettered tasks, as many as
// asked (2) or as the group holds.
func examplesOf(g driver.ErrorGroup, dead map[string]bool) error {
	if len(g.Examples) != int(min(g.Count, 2)) {
		return fmt.Errorf("error group has %d examples %v; want %d", len(g.Examples), g.Examples, min(g.Count, 2))
	}
	for _, id := range g.Examples {
		if !dead[id] {
			return errors.New("error group example " + id + " is not a dead-lettered task")
		}
	}
	return nil
}
