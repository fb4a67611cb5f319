// Package historytest makes synthetic result records for the scale tests
// of the result history (docs/performance.md): records shaped as jobq
// writes them, with a share of dead letters and of preempted attempts.
package historytest

import (
	"context"
	"fmt"
	"sort"
	"strings"
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

// Scale is what Measure needs of a backend.
type Scale struct {
	// Agg is the backend's result history.
	Agg driver.ResultAggregator
	// Fill is the backend's FillRollups; Wait waits for a fill that a
	// history read started in the background; Forget drops every kept
	// rollup and ForgetLast the latest one. All four are nil for a backend
	// without rollups: Measure then times three reads.
	Fill               func() (int, error)
	Wait               func()
	Forget, ForgetLast func() error
}

// Measure runs the dashboard's 7-day, hourly result history (its edges
// on whole hours, so served from rollups where the backend keeps them) on
// the n records Records made over the 7 days before now, checks its sums
// and logs how long each step took: the first read with nothing rolled
// up (and the background fill it starts), the workers' fill of the whole
// window, a fill that finds nothing to do, a fill of the latest slot (or
// generation) alone, then three reads after the fill (the dashboard
// opened after a drain, and its refreshes).
func Measure(t testing.TB, s Scale, now time.Time, n int) {
	t.Helper()
	until := now.Truncate(time.Hour).Add(time.Hour)
	p := driver.HistoryParams{Since: until.Add(-7 * 24 * time.Hour), Until: until, Bucket: time.Hour, Examples: 3, ErrorGroups: 20}
	var wantEnds, wantDead int64
	span := 7 * 24 * time.Hour
	for i := range n {
		if end := now.Add(-span + time.Duration(int64(span)/int64(n)*int64(i))); !end.Before(p.Since) {
			wantEnds++
			if i%50 == 0 {
				wantDead++
			}
		}
	}
	read := func(what string) {
		t.Helper()
		began := time.Now()
		h, err := s.Agg.AggregateResults(context.Background(), p)
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
		if ends != wantEnds || dead != wantDead || errs != wantDead || len(h.Errors) != 3 {
			t.Errorf("history of %d records: %d ends, %d dead-lettered, %d in %d error groups; want %d, %d, %d in 3", n, ends, dead, errs, len(h.Errors), wantEnds, wantDead, wantDead)
		}
		t.Logf("%s: 7-day hourly history of %d records (%d in the window): %v (%d end bins, %d preempted attempts in %d bins, %d error groups)",
			what, n, wantEnds, took.Round(time.Millisecond), len(h.Ends), preempted, len(h.Attempts), len(h.Errors))
	}
	fill := func(what string) {
		t.Helper()
		began := time.Now()
		k, err := s.Fill()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d rolled up in %v", what, k, time.Since(began).Round(time.Millisecond))
	}
	if s.Fill == nil {
		// No rollups (an emulated history): every read adds the window up.
		for run := range 3 {
			read(fmt.Sprintf("read %d", run+1))
		}
		return
	}
	read("first read, nothing rolled up")
	began := time.Now()
	s.Wait()
	t.Logf("the background fill that read started ended %v after it", time.Since(began).Round(time.Millisecond))
	if err := s.Forget(); err != nil {
		t.Fatal(err)
	}
	fill("fill of the whole window (rollups dropped)")
	fill("fill again (nothing to do)")
	if err := s.ForgetLast(); err != nil {
		t.Fatal(err)
	}
	fill("fill of the latest slot or generation (its rollup dropped)")
	for run := range 3 {
		read(fmt.Sprintf("read %d after the fill", run+1))
	}
}

// Rollups is what CheckRollup needs of a backend that serves Rollable
// windows from rollups.
type Rollups struct {
	// Put stores records; Delete deletes the records of task IDs; Purge
	// deletes the records that expired before now.
	Put    func([]*driver.ResultRecord) error
	Delete func(ids []string) error
	Purge  func(now time.Time) error
	// Rolled is the backend's AggregateResults (rollups for a Rollable
	// window); Scanned adds the window up from the records only.
	Rolled, Scanned func(driver.HistoryParams) (*driver.History, error)
	// Kept is how many rollups the backend keeps.
	Kept func() (int, error)
	// Fill, when set, runs the backend's rollup fill (and waits for one
	// a history read started), after the first history.
	Fill func() error
	// N is how many records to write (3000 when 0): enough for the
	// backend to keep rollups.
	N int
}

// CheckRollup checks that windows served from rollups add up to what the
// records add up to: when the rollups are first made, when they are read
// back, and after records of closed slots were purged, deleted, written
// late and replaced.
func CheckRollup(t *testing.T, b Rollups) {
	t.Helper()
	now := time.Now()
	n := b.N
	if n == 0 {
		n = 3000
	}
	var recs []*driver.ResultRecord
	if err := Records(n, 5000, now, 3*24*time.Hour, func(r []*driver.ResultRecord) error {
		recs = append(recs, r...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if i%7 == 3 {
			r.ExpiresAt = now.Add(-time.Second)
		}
	}
	for i := 0; i < n; i += 5000 {
		if err := b.Put(recs[i:min(i+5000, n)]); err != nil {
			t.Fatal(err)
		}
	}
	until := now.Truncate(time.Hour).Add(time.Hour)
	windows := []driver.HistoryParams{
		{Since: until.Add(-7 * 24 * time.Hour), Until: until, Bucket: time.Hour, Examples: 3, ErrorGroups: 20},
		{Since: until.Add(-24 * time.Hour), Until: until, Bucket: time.Hour, Examples: 3, ErrorGroups: 2},
		{Since: until.Add(-6 * time.Hour), Until: until, Bucket: 10 * time.Minute, Examples: 5, ErrorGroups: 20},
	}
	same := func(step string) {
		t.Helper()
		for _, p := range windows {
			if !p.Rollable() {
				t.Fatalf("window %v/%v is not Rollable", p.Until.Sub(p.Since), p.Bucket)
			}
			rolled, err := b.Rolled(p)
			if err != nil {
				t.Fatalf("%s: rollup history: %v", step, err)
			}
			scanned, err := b.Scanned(p)
			if err != nil {
				t.Fatalf("%s: scanned history: %v", step, err)
			}
			if got, want := Canonical(rolled), Canonical(scanned); got != want {
				t.Errorf("%s, window %v by %v: the rollups and the records differ:\n%s", step, p.Until.Sub(p.Since), p.Bucket, diff(got, want))
			}
		}
	}
	same("first")
	if b.Fill != nil {
		if err := b.Fill(); err != nil {
			t.Fatalf("rollup fill: %v", err)
		}
	}
	if n, err := b.Kept(); err != nil || n == 0 {
		t.Fatalf("rollups kept after a history: %d, %v; want some", n, err)
	}
	same("read back")
	if err := b.Purge(now); err != nil {
		t.Fatal(err)
	}
	same("after a purge")
	if err := b.Delete([]string{recs[n/30].ID, recs[n*2/3].ID, recs[n-50].ID}); err != nil {
		t.Fatal(err)
	}
	late := *recs[n/2]
	late.ID, late.UpdatedAt = "late-record", now.Add(-30*time.Hour)
	moved := *recs[n/3]
	moved.State, moved.UpdatedAt = driver.ResultDeadLettered, now.Add(-2*time.Hour)
	moved.Data = []byte(`{"v": 1, "exit_code": 9, "output": "moved"}`)
	if err := b.Put([]*driver.ResultRecord{&late, &moved}); err != nil {
		t.Fatal(err)
	}
	same("after deletes, a late record and a replaced one")
}

// Canonical prints h with its lists in one order, bins of the same key
// added together (a history may list a bucket's attempts in two bins), for
// comparisons.
func Canonical(h *driver.History) string {
	type endKey struct {
		bucket, bin int
		state       driver.ResultState
	}
	type attKey struct {
		bucket       int
		outcome, env string
	}
	ends := map[endKey]driver.EndBin{}
	for _, e := range h.Ends {
		k := endKey{e.Bucket, e.RuntimeBin, e.State}
		b := ends[k]
		b.Count += e.Count
		b.MaxRuntime = max(b.MaxRuntime, e.MaxRuntime)
		ends[k] = b
	}
	atts := map[attKey]int64{}
	for _, a := range h.Attempts {
		atts[attKey{a.Bucket, a.Outcome, a.Env}] += a.Count
	}
	var lines []string
	for k, e := range ends {
		lines = append(lines, fmt.Sprintf("end b%d %s bin%d n%d max%v", k.bucket, k.state, k.bin, e.Count, e.MaxRuntime))
	}
	for k, n := range atts {
		lines = append(lines, fmt.Sprintf("attempt b%d %s %q n%d", k.bucket, k.outcome, k.env, n))
	}
	sort.Strings(lines)
	for _, g := range h.Errors {
		code := "none"
		if g.ExitCode != nil {
			code = fmt.Sprint(*g.ExitCode)
		}
		lines = append(lines, fmt.Sprintf("error %s %q n%d last %s examples %v", code, g.FirstLine, g.Count, g.Last.UTC().Format(time.RFC3339Nano), g.Examples))
	}
	return strings.Join(lines, "\n")
}

// diff is the lines of a and b that the other lacks.
func diff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !inb[l] {
			out = append(out, "rollups only: "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ina[l] {
			out = append(out, "records only: "+l)
		}
	}
	return strings.Join(out, "\n")
}

// Fills is what CheckFill needs of a backend that fills its rollups in
// the background.
type Fills struct {
	// Put stores records; Fill is the backend's FillRollups.
	Put  func([]*driver.ResultRecord) error
	Fill func() (int, error)
	// Rolled is the backend's AggregateResults; Scanned adds the window
	// up from the records only.
	Rolled, Scanned func(driver.HistoryParams) (*driver.History, error)
	// ReadAddedUp is how many closed slots (or generations) history reads
	// added up from their records so far.
	ReadAddedUp func() int64
	// N is how many records to write over the 6 hours before now (600
	// when 0).
	N int
}

// fillSlot is the longest rollup slot CheckFill's backends close by time.
const fillSlot = 10 * time.Minute

// CheckFill checks that after the background fill the dashboard's windows
// are served from rollups alone (no closed slot added up from its records
// at read time) and add up to what the records add up to, and that a
// second fill finds nothing to do.
func CheckFill(t *testing.T, b Fills) {
	t.Helper()
	// A slot (10 minutes on Postgres) that closes between the fill and the
	// reads is rightly added up from its records at read time, and so is
	// one that closed less than driver.RollupFillGrace before the fill
	// (the fill leaves it for late records): start well clear of both.
	if left := time.Until(time.Now().Truncate(fillSlot).Add(fillSlot)); left < 15*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
	if since := time.Since(time.Now().Truncate(fillSlot)); since < driver.RollupFillGrace+5*time.Second {
		time.Sleep(driver.RollupFillGrace + 5*time.Second - since)
	}
	now := time.Now()
	n := b.N
	if n == 0 {
		n = 600
	}
	if err := Records(n, 5000, now, 6*time.Hour, b.Put); err != nil {
		t.Fatal(err)
	}
	if k, err := b.Fill(); err != nil || k == 0 {
		t.Fatalf("first fill: %d rolled up, %v; want some", k, err)
	}
	if k, err := b.Fill(); err != nil || k != 0 {
		t.Fatalf("second fill: %d rolled up, %v; want 0 (all rolled up)", k, err)
	}
	until := now.Truncate(time.Hour).Add(time.Hour)
	for _, p := range []driver.HistoryParams{
		{Since: until.Add(-6 * time.Hour), Until: until, Bucket: 10 * time.Minute, Examples: 5, ErrorGroups: 20},
		{Since: until.Add(-24 * time.Hour), Until: until, Bucket: time.Hour, Examples: 3, ErrorGroups: 20},
	} {
		before := b.ReadAddedUp()
		rolled, err := b.Rolled(p)
		if err != nil {
			t.Fatal(err)
		}
		if added := b.ReadAddedUp() - before; added != 0 {
			t.Errorf("window %v by %v after the fill: %d closed slots added up from their records at read time; want 0 (all from rollups)", p.Until.Sub(p.Since), p.Bucket, added)
		}
		scanned, err := b.Scanned(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := Canonical(rolled), Canonical(scanned); got != want {
			t.Errorf("window %v by %v: the filled rollups and the records differ:\n%s", p.Until.Sub(p.Since), p.Bucket, diff(got, want))
		}
	}
}
