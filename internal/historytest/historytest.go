// Package historytest makes synthetic result records for the scale tests
// of the result history (docs/performance.md): records shaped as jobq
// writes them, with a share of dead letters and of preempted attempts.
package historytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// Records returns n records that ended over the span before now, spread
// evenly, in batches of batch: every 50th is dead-lettered (exit code 1
// to 3, a first line per code), every 20th lists a preempted attempt on
// one of 4 hosts before it succeeded. Runtimes run from 1 s to about 10
// minutes.
func Records(n, batch int, now time.Time, span time.Duration, each func([]*driver.ResultRecord) error) error {
	out := make([]*driver.ResultRecord, 0, batch)
	output := "processing shard\nline two of the output, long enough to be a typical tail of a shell task's output\n"
	for i := range n {
		end := now.Add(-span + time.Duration(int64(span)/int64(n)*int64(i)))
		start := end.Add(-time.Second - time.Duration(i%600)*time.Second)
		const tf = time.RFC3339Nano
		rec := &driver.ResultRecord{ID: fmt.Sprintf("%032x", i+1), State: driver.ResultSucceeded, UpdatedAt: end, ExpiresAt: now.Add(driver.DefaultRetention)}
		var data string
		switch {
		case i%50 == 0:
			rec.State = driver.ResultDeadLettered
			code := 1 + i%3
			data = fmt.Sprintf(`{"v": 1, "delivery_count": 3, "exit_code": %d, "error": "exit status %d", "output": "error %d: shard failed\nTraceback ...", "started": %q, "finished": %q, "worker": "w-%d", "host": "host-%d"}`,
				code, code, code, start.UTC().Format(tf), end.UTC().Format(tf), i%16, i%4)
		case i%20 == 0:
			pre := start.Add(-time.Minute)
			data = fmt.Sprintf(`{"v": 1, "delivery_count": 2, "output": %q, "started": %q, "finished": %q, "worker": "w-%d", "host": "host-%d", "attempts": [{"delivery": 1, "outcome": "preempted", "worker": "w-%d", "host": "host-%d", "detail": "worker stopping", "start": %q, "end": %q}]}`,
				output, start.UTC().Format(tf), end.UTC().Format(tf), i%16, i%4, (i+1)%16, (i+1)%4, pre.UTC().Format(tf), start.UTC().Format(tf))
		default:
			data = fmt.Sprintf(`{"v": 1, "delivery_count": 1, "output": %q, "started": %q, "finished": %q, "worker": "w-%d", "host": "host-%d"}`,
				output, start.UTC().Format(tf), end.UTC().Format(tf), i%16, i%4)
		}
		rec.Data = []byte(data)
		out = append(out, rec)
		if len(out) == batch || i == n-1 {
			if err := each(out); err != nil {
				return err
			}
			out = out[:0]
		}
	}
	return nil
}

// Measure runs a 7-day, hourly result history on agg over the n records
// Records made before now, checks its sums and logs how long it took.
func Measure(t testing.TB, agg driver.ResultAggregator, now time.Time, n int) {
	t.Helper()
	p := driver.HistoryParams{Since: now.Add(-7*24*time.Hour - time.Minute), Until: now.Add(time.Minute), Bucket: time.Hour, Examples: 3, ErrorGroups: 20}
	for run := range 2 {
		began := time.Now()
		h, err := agg.AggregateResults(context.Background(), p)
		took := time.Since(began)
		if err != nil {
			t.Fatal(err)
		}
		var ends, dead, preempted, errs int64
		for _, e := range h.Ends {
			ends += e.Count
			if e.State == driver.ResultDeadLettered {
				dead += e.Count
			}
		}
		for _, a := range h.Attempts {
			if a.Outcome == "preempted" {
				preempted += a.Count
			}
		}
		for _, g := range h.Errors {
			errs += g.Count
		}
		wantDead := int64((n + 49) / 50)
		if ends != int64(n) || dead != wantDead || errs != wantDead || len(h.Errors) != 3 {
			t.Errorf("history of %d records: %d ends, %d dead-lettered, %d in %d error groups; want %d, %d, %d in 3", n, ends, dead, errs, len(h.Errors), n, wantDead, wantDead)
		}
		t.Logf("run %d: 7-day hourly history of %d records: %v (%d end bins, %d preempted attempts in %d bins, %d error groups)",
			run+1, n, took.Round(time.Millisecond), len(h.Ends), preempted, len(h.Attempts), len(h.Errors))
	}
}
