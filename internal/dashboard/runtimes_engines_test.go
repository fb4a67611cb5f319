package dashboard

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jobq/jobq"
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
