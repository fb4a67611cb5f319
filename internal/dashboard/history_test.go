package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
)

// getHistory reads /api/history?window=win.
func getHistory(t *testing.T, s *Server, win string) historyReport {
	t.Helper()
	w := do(s, httptest.NewRequest(http.MethodGet, "/api/history?window="+win, nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /api/history?window=%s: %d %s", win, w.Code, w.Body)
	}
	var rep historyReport
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestHistoryFromRecords: the history shows the dead letters the queue
// recorded before the dashboard started, with their error group and
// examples; it is kept for historyTTL (a record stored meanwhile shows
// later); a window it does not offer is a 400 naming the ones it does.
func TestHistoryFromRecords(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 3)
	s := newServer(t, Config{Queue: q})
	rep := getHistory(t, s, "6h")
	if !rep.Available || rep.Level != "native" || rep.Totals.DeadLettered != 3 || len(rep.Buckets) != 36 {
		t.Fatalf("history = %+v; want 3 dead-lettered in 36 buckets, native", rep)
	}
	if len(rep.Errors) != 1 || rep.Errors[0].Count != 3 || len(rep.Errors[0].Examples) != 3 {
		t.Fatalf("error groups = %+v; want one of 3 tasks with 3 examples", rep.Errors)
	}
	if g := rep.Errors[0]; strings.Contains(g.FirstLine, "hunter2") || g.FirstLine != "connecting to postgres://app:xxxxx@db/x" {
		t.Errorf("error group's first line %q; want the output's first line, redacted", g.FirstLine)
	}
	// One more dead letter: the kept aggregate does not show it yet.
	ctx := t.Context()
	if _, err := q.Push(ctx, &jobq.Task{Command: "false"}); err != nil {
		t.Fatal(err)
	}
	env, err := q.Receive(ctx, jobq.ReceiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.DeadLetter(ctx, "later", ""); err != nil {
		t.Fatal(err)
	}
	if again := getHistory(t, s, "6h"); again.Totals.DeadLettered != 3 {
		t.Errorf("within %v the history shows %d dead letters; want the kept 3", historyTTL, again.Totals.DeadLettered)
	}
	// Once it is past its lifetime, a request still gets the kept one and
	// starts a recomputation, which a later request sees.
	e := s.hist.windows["6h"]
	e.mu.Lock()
	e.at = e.at.Add(-e.ttl)
	e.mu.Unlock()
	if stale := getHistory(t, s, "6h"); stale.Totals.DeadLettered != 3 {
		t.Errorf("past its lifetime the history shows %d dead letters; want the kept 3 while it is recomputed", stale.Totals.DeadLettered)
	}
	deadline := time.Now().Add(10 * time.Second)
	for getHistory(t, s, "6h").Totals.DeadLettered != 4 {
		if time.Now().After(deadline) {
			t.Fatal("the recomputed history never showed the fourth dead letter")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if day := getHistory(t, s, "24h"); day.Totals.DeadLettered != 4 || len(day.Buckets) != 24 {
		t.Errorf("a window not asked before shows %d dead letters in %d buckets; want 4 in 24", day.Totals.DeadLettered, len(day.Buckets))
	}
	w := do(s, httptest.NewRequest(http.MethodGet, "/api/history?window=30d", nil))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "24h, 6h, 7d") {
		t.Errorf("window=30d: %d %s; want 400 naming the windows", w.Code, w.Body)
	}
	// An example opens its record.
	id := rep.Errors[0].Examples[0]
	w = do(s, httptest.NewRequest(http.MethodGet, "/api/result?id="+id, nil))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"state":"dead-lettered"`) || strings.Contains(w.Body.String(), "hunter2") {
		t.Errorf("/api/result?id=%s: %d %s; want the dead-lettered record, redacted", id, w.Code, w.Body)
	}
	if w := do(s, httptest.NewRequest(http.MethodGet, "/api/result", nil)); w.Code != http.StatusBadRequest {
		t.Errorf("/api/result without id: %d; want 400", w.Code)
	}
}

// TestHistoryUnavailable: a backend that cannot add records up says so,
// and the fleet still shows.
func TestHistoryUnavailable(t *testing.T) {
	t.Parallel()
	q, err := jobq.Open(t.Context(), "mem://history-unavailable?unsupported=results")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	s := newServer(t, Config{Queue: q, Workers: func(ctx context.Context) ([]Worker, error) { return nil, nil }})
	rep := getHistory(t, s, "")
	if rep.Available || !strings.Contains(rep.Message, "not available on this backend") || rep.Fleet == nil || !rep.Fleet.Available {
		t.Errorf("history = %+v; want unavailable with a message, and the fleet", rep)
	}
}

func TestFillHistory(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	p := driver.HistoryParams{Since: since, Until: since.Add(3 * time.Hour), Bucket: time.Hour}
	slow := driver.RuntimeBin(10 * time.Second)
	fast := driver.RuntimeBin(time.Second)
	h := &driver.History{
		Ends: []driver.EndBin{
			{Bucket: 0, State: driver.ResultSucceeded, RuntimeBin: fast, Count: 9, MaxRuntime: 1100 * time.Millisecond},
			{Bucket: 0, State: driver.ResultSucceeded, RuntimeBin: slow, Count: 1, MaxRuntime: 10 * time.Second},
			{Bucket: 2, State: driver.ResultDeadLettered, RuntimeBin: -1, Count: 2},
			{Bucket: 2, State: driver.ResultCancelled, RuntimeBin: fast, Count: 5, MaxRuntime: time.Hour},
		},
		Attempts: []driver.AttemptBin{
			{Bucket: 1, Outcome: "preempted", Env: "Standard_D4s_v5/westeurope", Count: 3},
			{Bucket: 2, Outcome: "lease-expired", Env: "", Count: 1},
			{Bucket: 2, Outcome: "failure", Env: "Standard_D4s_v5/westeurope", Count: 2},
			{Bucket: 2, Outcome: "gate-miss", Env: "x", Count: 7},
		},
	}
	rep := &historyReport{}
	fillHistory(rep, h, p)
	b := rep.Buckets
	switch {
	case len(b) != 3 || b[0].Succeeded != 10 || b[2].DeadLettered != 2 || b[2].Cancelled != 5:
		t.Fatalf("buckets %+v; want 10 succeeded, then 2 dead-lettered and 5 cancelled", b)
	case b[0].Count != 10 || *b[0].P50S > 1.2 || *b[0].P50S < 0.8 || *b[0].P90S > 1.2 || *b[0].MaxS != 10:
		t.Errorf("bucket 0 runtimes %+v; want p50 and p90 about 1s (9 of 10), max 10s", b[0].runtimeStats)
	case b[2].Count != 0 || b[2].P50S != nil:
		t.Errorf("bucket 2 runtimes %+v; want none (cancelled runtimes and dead letters without one are not counted)", b[2].runtimeStats)
	case b[1].Preempted != 3 || b[2].LeaseExpired != 1 || rep.Totals.Preempted != 3 || rep.Totals.Failed != 2:
		t.Errorf("interruptions %+v, totals %+v; want 3 preempted in bucket 1, a lease expired in bucket 2, 2 failures", b, rep.Totals)
	}
	if len(rep.ByEnv) != 2 || rep.ByEnv[0].Env != "Standard_D4s_v5/westeurope" || rep.ByEnv[0].Preempted != 3 || rep.ByEnv[0].Failed != 2 || rep.ByEnv[1].LeaseExpired != 1 {
		t.Errorf("by environment %+v; want the labelled one first (3 preempted, 2 failed), then the unknown one", rep.ByEnv)
	}
}

func TestSummarizeFleet(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 30, 0, 0, time.UTC)
	ws := []Worker{
		{ID: "b", State: "live", Started: now.Add(-10 * time.Minute), Heartbeat: now, CPUPercent: 80, RSSBytes: 1 << 30},
		{ID: "a", State: "vanished", Started: now.Add(-3 * time.Hour), Heartbeat: now.Add(-2 * time.Hour)},
		{ID: "c", State: "withdrawn", Started: now.Add(-30 * time.Hour), Heartbeat: now.Add(-20 * time.Hour)},
	}
	f := summarizeFleet(ws, now)
	var started, ended int
	for _, c := range f.Churn {
		started += c.Started
		ended += c.Ended
	}
	last := f.Churn[len(f.Churn)-1]
	switch {
	case len(f.Churn) != fleetHours || started != 2 || ended != 2 || last.Started != 1:
		t.Errorf("churn %+v; want %d hours, 2 started (one this hour; one began before the day), 2 ended", f.Churn, fleetHours)
	case f.Lifetimes.Count != 2:
		t.Errorf("lifetimes %+v; want the 2 that ended", f.Lifetimes)
	case len(f.Workers) != 3 || f.Workers[0].ID != "b" || f.Workers[1].ID != "a":
		t.Errorf("workers %+v; want the live one first, then by ID", f.Workers)
	}
}
