package confsuite

import (
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
	ends     map[driver.ResultState]int64
	slow     int64 // succeeded records in the runtime bin of historySlow
	requeued int64 // requeued attempts on historyHost
	errors   int64 // dead-lettered records in the group of exit code 3 and "boom"
}

// historySlow is the runtime of the slow tasks of checkResultHistory.
const historySlow = 3 * time.Second

// historyHost is the host of the requeued attempts.
const historyHost = "history-host"

// checkResultHistory: the window's records add up, natively or by a scan,
// to what was settled: the ends by state and runtime bin, the recorded
// attempts by outcome and host (where messages keep attempt histories),
// and the dead letters grouped by exit code and first output line, with
// their task IDs as examples. An unsupported declaration fails with
// Unimplemented.
func checkResultHistory(c *C) {
	q := c.open()
	c.needResults(q)
	p := driver.HistoryParams{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour), Bucket: time.Minute, Examples: 2, ErrorGroups: 10}
	if level(q, driver.ResultHistory) == driver.Unsupported {
		_, err := q.Admin().ResultHistory(c.ctx(), p)
		c.expectCode(err, errcode.Unimplemented, "ResultHistory on a backend without result-history")
		c.skipNeeds("driver.ResultAggregator or driver.ResultScanner (feature result-history)", "result-history is unsupported: "+q.Capabilities().Features[driver.ResultHistory].Fallback)
	}
	_, err := q.Admin().ResultHistory(c.ctx(), driver.HistoryParams{Since: p.Since, Until: p.Since, Bucket: time.Minute})
	c.expectCode(err, errcode.InvalidArgument, "ResultHistory of an empty window")
	want, dead := c.settleForHistory(q)
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
	// The dashboard's window (whole hours: served from rollups where the
	// backend keeps them), twice: the first fills them, the second reads
	// them back.
	until := time.Now().Truncate(time.Hour).Add(time.Hour)
	dash := driver.HistoryParams{Since: until.Add(-24 * time.Hour), Until: until, Bucket: time.Hour, Examples: 2, ErrorGroups: 10}
	for run := range 2 {
		h, err = q.Admin().ResultHistory(c.ctx(), dash)
		if err != nil {
			c.Fatalf("ResultHistory of the last 24 hours (run %d): %v", run+1, err)
		}
		if msg := historyMatches(h, want, dead); msg != "" {
			c.Fatalf("ResultHistory of the last 24 hours (run %d): %s", run+1, msg)
		}
	}
}

// settleForHistory ends tasks in every way the history counts, and
// returns what it must add up to and the dead-lettered task IDs.
func (c *C) settleForHistory(q *handle) (historyWant, map[string]bool) {
	want := historyWant{ends: map[driver.ResultState]int64{}}
	deadLetters := level(q, driver.DeadLetter) != driver.Unsupported
	attempts := level(q, driver.InPlaceUpdate) == driver.Native
	n := 5
	c.push(q, task("history 0"), task("history 1"), task("history 2"), task("history 3"), task("history 4"))
	if attempts {
		// One task is stopped once, on historyHost, before it succeeds.
		for _, e := range c.receiveAll(q, 1, c.longVis(q)) {
			hooks.RecordAttempt(e, jobq.Attempt{Worker: "history-worker", Host: historyHost, Start: time.Now(), End: time.Now(), Outcome: jobq.OutcomeRequeued})
			if err := e.Requeue(c.ctx(), 0); err != nil {
				c.Fatalf("requeue: %v", err)
			}
		}
		want.requeued = 1
	}
	dead := map[string]bool{}
	code := 3
	i := 0
	for id, e := range c.receiveAll(q, n, c.longVis(q)) {
		var err error
		switch {
		case i < 2:
			hooks.RecordAttempt(e, jobq.Attempt{Worker: "history-worker", Host: "h", Start: time.Now().Add(-historySlow), Outcome: jobq.OutcomeSuccess})
			err = e.Complete(c.ctx())
			want.ends[driver.ResultSucceeded]++
			want.slow++
		case i == 2 || !deadLetters:
			err = e.Complete(c.ctx())
			want.ends[driver.ResultSucceeded]++
		default:
			e.SetResult(jobq.ResultDetails{ExitCode: &code, Output: "\n  boom\nsecond line"})
			err = e.DeadLetter(c.ctx(), "history reason", "")
			want.ends[driver.ResultDeadLettered]++
			want.errors++
			dead[id] = true
		}
		if err != nil {
			c.Fatalf("settle: %v", err)
		}
		i++
	}
	return want, dead
}

// historyMatches says how h differs from want ("" when it does not).
func historyMatches(h *driver.History, want historyWant, dead map[string]bool) string {
	got := historyWant{ends: map[driver.ResultState]int64{}}
	slowBin := driver.RuntimeBin(historySlow)
	for _, e := range h.Ends {
		got.ends[e.State] += e.Count
		if e.State == driver.ResultSucceeded && e.RuntimeBin == slowBin {
			got.slow += e.Count
			if e.MaxRuntime < historySlow || e.MaxRuntime > historySlow+time.Minute {
				return fmt.Sprintf("the slow tasks' max runtime is %v; want about %v", e.MaxRuntime, historySlow)
			}
		}
	}
	for _, a := range h.Attempts {
		if a.Outcome == string(jobq.OutcomeRequeued) && a.Env == historyHost {
			got.requeued += a.Count
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
	if fmt.Sprint(got.ends) != fmt.Sprint(want.ends) || got.slow != want.slow || got.requeued != want.requeued || got.errors != want.errors {
		return fmt.Sprintf("ends %v, %d slow (%v), %d requeued on %s, %d errors (exit 3, \"boom\"); want ends %v, %d slow, %d requeued, %d errors (history %+v)",
			got.ends, got.slow, historySlow, got.requeued, historyHost, got.errors, want.ends, want.slow, want.requeued, want.errors, *h)
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
