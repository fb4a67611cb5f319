package jobq

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// historyRecord is a record of state that ended at end after running
// for run, with d's other details.
func historyRecord(id string, state driver.ResultState, end time.Time, run time.Duration, d recordDetails) *driver.ResultRecord {
	d.deliveries = max(d.deliveries, 1)
	if run > 0 {
		d.started, d.ended = end.Add(-run), end
	}
	return &driver.ResultRecord{ID: id, State: state, UpdatedAt: end, ExpiresAt: end.Add(time.Hour), Data: d.encode(state)}
}

// TestHistoryFold: the emulated result history adds up what the native
// ones do: final records of the window only, damaged ones skipped,
// runtime bins with the longest runtime, attempts other than successes by
// outcome and host, error groups with their most recent examples.
func TestHistoryFold(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	p := driver.HistoryParams{Since: since, Until: since.Add(2 * time.Hour), Bucket: time.Hour, Examples: 2, ErrorGroups: 5}
	code := 3
	boom := recordDetails{exitCode: &code, output: "\n  boom\nmore", errText: "exit status 3"}
	stopped := recordDetails{attempts: []Attempt{
		{Delivery: 1, Outcome: OutcomeRequeued, Host: "spot-1", End: since.Add(10 * time.Minute)},
		{Delivery: 2, Outcome: OutcomeSuccess, Host: "spot-2", End: since.Add(70 * time.Minute)},
	}, deliveries: 2}
	f := newHistoryFold(p)
	for _, r := range []*driver.ResultRecord{
		historyRecord("ok-1", driver.ResultSucceeded, since.Add(5*time.Minute), 3*time.Second, recordDetails{}),
		historyRecord("ok-2", driver.ResultSucceeded, since.Add(6*time.Minute), 2900*time.Millisecond, stopped),
		historyRecord("dead-1", driver.ResultDeadLettered, since.Add(70*time.Minute), 0, boom),
		historyRecord("dead-2", driver.ResultDeadLettered, since.Add(80*time.Minute), 0, boom),
		historyRecord("dead-3", driver.ResultDeadLettered, since.Add(75*time.Minute), 0, boom),
		historyRecord("later", driver.ResultSucceeded, since.Add(3*time.Hour), time.Second, recordDetails{}),
		historyRecord("asked", driver.ResultCancelRequested, since.Add(time.Minute), 0, recordDetails{}),
		{ID: "damaged", State: driver.ResultSucceeded, UpdatedAt: since.Add(time.Minute), Data: []byte("not json")},
	} {
		f.add(r)
	}
	h := f.history()
	bin := driver.RuntimeBin(3 * time.Second)
	ends := map[string]driver.EndBin{}
	for _, e := range h.Ends {
		ends[fmt.Sprintf("%d/%s/%d", e.Bucket, e.State, e.RuntimeBin)] = e
	}
	if e := ends[fmt.Sprintf("0/succeeded/%d", bin)]; len(ends) != 2 || e.Count != 2 || e.MaxRuntime != 3*time.Second || ends["1/dead-lettered/-1"].Count != 3 {
		t.Errorf("ends %+v; want 2 succeeded in bin %d (max 3s) in bucket 0 and 3 dead-lettered without a runtime in bucket 1", h.Ends, bin)
	}
	if len(h.Attempts) != 1 || h.Attempts[0] != (driver.AttemptBin{Bucket: 0, Outcome: "requeued", Env: "spot-1", Count: 1}) {
		t.Errorf("attempts %+v; want the one requeued on spot-1 in bucket 0 (not the success)", h.Attempts)
	}
	if len(h.Errors) != 1 || h.Errors[0].FirstLine != "boom" || *h.Errors[0].ExitCode != 3 || h.Errors[0].Count != 3 ||
		fmt.Sprint(h.Errors[0].Examples) != "[dead-2 dead-3]" || !h.Errors[0].Last.Equal(since.Add(80*time.Minute)) {
		t.Errorf("errors %+v; want one group (3, boom) of 3 with the 2 most recent examples", h.Errors)
	}
}

// TestHistoryFoldBoundsGroups: past maxHistoryGroups distinct errors, the
// rest are counted in one group.
func TestHistoryFoldBoundsGroups(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	f := newHistoryFold(driver.HistoryParams{Since: since, Until: since.Add(time.Hour), Bucket: time.Hour, ErrorGroups: maxHistoryGroups + 10})
	for i := range maxHistoryGroups + 3 {
		f.add(historyRecord(fmt.Sprint(i), driver.ResultDeadLettered, since.Add(time.Minute), 0, recordDetails{output: fmt.Sprintf("error %d", i)}))
	}
	h := f.history()
	if len(h.Errors) != maxHistoryGroups+1 || h.Errors[0].FirstLine != otherErrors || h.Errors[0].Count != 3 {
		t.Errorf("%d groups, the largest %+v; want %d, the largest the other errors' (3)", len(h.Errors), h.Errors[0], maxHistoryGroups+1)
	}
}

// TestHistoryFoldExamplesIgnoreListingOrder: an error group's examples
// are the most recent, then the smallest IDs, whatever order the backend
// lists its records in, and a record a listing meets twice (Redis's
// HSCAN may) is one example.
func TestHistoryFoldExamplesIgnoreListingOrder(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	at := since.Add(time.Minute)
	dead := func(id string) *driver.ResultRecord {
		return historyRecord(id, driver.ResultDeadLettered, at, 0, recordDetails{output: "boom"})
	}
	for _, tt := range []struct {
		name  string
		order []string
		want  string
	}{
		{"by ID", []string{"a", "b", "c"}, "[a b]"},
		{"reversed", []string{"c", "b", "a"}, "[a b]"},
		{"met twice", []string{"c", "a", "c"}, "[a c]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newHistoryFold(driver.HistoryParams{Since: since, Until: since.Add(time.Hour), Bucket: time.Hour, Examples: 2, ErrorGroups: 5})
			for _, id := range tt.order {
				f.add(dead(id))
			}
			h := f.history()
			if len(h.Errors) != 1 {
				t.Fatalf("errors %+v; want one group", h.Errors)
			}
			if got := fmt.Sprint(h.Errors[0].Examples); got != tt.want {
				t.Errorf("examples %s; want %s", got, tt.want)
			}
		})
	}
}
