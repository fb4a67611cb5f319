package dashboard

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/tools/testkit/engines"
	"github.com/jobq/jobq/worker"
)

// TestRuntimesCountAnAttemptOnce: a task the dashboard followed from the
// queue that ended dead-lettered has its last attempt both in its result
// record and in the dead letter's attempt history. The runtime
// distribution counts that attempt once, not twice.
func TestRuntimesCountAnAttemptOnce(t *testing.T) {
	t.Parallel()
	for engine, u := range engines.URLs(t, "dash-runtimes") {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			q := engines.Open(t, u)
			s := newServer(t, Config{Queue: q})
			if _, err := q.PushBatch(ctx, []*jobq.Task{{Command: "exit 3"}, {Command: "true"}}, jobq.PushOptions{}); err != nil {
				t.Fatal(err)
			}
			s.followResults(ctx) // sees both queued
			w := worker.New(q, worker.NewShell(), worker.Options{Concurrency: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err := w.Run(ctx); err != nil {
				t.Fatal(err)
			}
			s.followResults(ctx)
			rec := do(s, httptest.NewRequest(http.MethodGet, "/api/runtimes", nil))
			var rep struct {
				Count    int            `json:"count"`
				Outcomes map[string]int `json:"outcomes"`
				Source   string         `json:"source"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
				t.Fatalf("%s: %v", rec.Body, err)
			}
			if rep.Outcomes["dead-lettered"] != 1 || rep.Outcomes["succeeded"] != 1 {
				t.Fatalf("outcomes %v; want one succeeded and one dead-lettered (%s)", rep.Outcomes, rec.Body)
			}
			// Two attempts ran: the failed one and the successful one.
			if rep.Count != 2 {
				t.Errorf("runtimes count %d (%s); want 2, one per attempt that ran", rep.Count, rep.Source)
			}
		})
	}
}

// TestFollowedTaskPushedAgainWaitsForItsNewRun: a task pushed again with
// the ID of one that ended (the same command; ai4s-jobq's IDs are
// deterministic) still has the earlier run's result record while it is
// queued. The dashboard follows the new run: it does not count the
// earlier record as the end of the task it saw queued.
func TestFollowedTaskPushedAgainWaitsForItsNewRun(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for engine, u := range engines.URLs(t, "dash-again") {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			q := engines.Open(t, u)
			run := func() {
				t.Helper()
				if err := worker.New(q, worker.NewShell(), worker.Options{Concurrency: 1, Logger: quiet}).Run(ctx); err != nil {
					t.Fatal(err)
				}
			}
			first := &jobq.Task{Command: "true"}
			if _, err := q.Push(ctx, first); err != nil {
				t.Fatal(err)
			}
			run()
			// The earlier run ended more than the clocks' slack before the
			// push again, as if it had run a while ago.
			backdateRecord(t, q, first.ID, 2*runClockSlack)
			if _, err := q.Push(ctx, &jobq.Task{Command: "true"}); err != nil {
				t.Fatal(err)
			}
			s := newServer(t, Config{Queue: q})
			s.followResults(ctx)
			if ended, following, _ := s.results.snapshot(); len(ended) != 0 || following != 1 {
				t.Fatalf("while queued again: %d ended, %d followed; want 0 ended (the record is the earlier run's), 1 followed", len(ended), following)
			}
			run()
			s.followResults(ctx)
			if ended, following, _ := s.results.snapshot(); len(ended) != 1 || following != 0 {
				t.Fatalf("after the new run: %d ended, %d followed; want 1 ended, 0 followed", len(ended), following)
			}
		})
	}
}

// TestStatsDrainAgreesWithItsCounts: /api/stats reads the counts at the
// request; its drain estimate must be of those counts, not of the last
// sample's, or one document says size 0 and a drain time to come.
func TestStatsDrainAgreesWithItsCounts(t *testing.T) {
	t.Parallel()
	for engine, u := range engines.URLs(t, "dash-drain") {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			q := engines.Open(t, u)
			s := newServer(t, Config{Queue: q})
			if _, err := q.PushBatch(ctx, []*jobq.Task{{Command: "echo 1"}, {Command: "echo 2"}, {Command: "echo 3"}, {Command: "echo 4"}}, jobq.PushOptions{}); err != nil {
				t.Fatal(err)
			}
			complete := func(n int) {
				t.Helper()
				for range n {
					env, err := q.Receive(ctx, jobq.ReceiveOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if err := env.Complete(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Sample(ctx); err != nil {
				t.Fatal(err)
			}
			complete(2)
			if err := s.Sample(ctx); err != nil {
				t.Fatal(err)
			}
			complete(2) // drained since the last sample
			rec := do(s, httptest.NewRequest(http.MethodGet, "/api/stats", nil))
			var doc struct {
				Size     *int64   `json:"size"`
				DrainETA *float64 `json:"drain_eta_s"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				t.Fatalf("%s: %v", rec.Body, err)
			}
			if doc.Size == nil || *doc.Size != 0 || doc.DrainETA == nil || *doc.DrainETA != 0 {
				t.Errorf("stats %s; want size 0 and drain_eta_s 0", rec.Body)
			}
		})
	}
}

// backdateRecord moves the result record of task id back by d.
func backdateRecord(t *testing.T, q *jobq.Queue, id string, d time.Duration) {
	t.Helper()
	store, ok := hooks.Driver(q).(driver.ResultStore)
	if !ok {
		t.Fatal("the driver keeps no records")
	}
	recs, err := store.GetResults(t.Context(), []string{id})
	if err != nil || len(recs) != 1 || recs[0] == nil {
		t.Fatalf("the record of task %s: %v, %v", id, recs, err)
	}
	r := *recs[0]
	r.UpdatedAt = r.UpdatedAt.Add(-d)
	if err := store.PutResults(t.Context(), []*driver.ResultRecord{&r}); err != nil {
		t.Fatal(err)
	}
}
