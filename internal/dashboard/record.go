package dashboard

import (
	"net/http"
	"time"

	"github.com/jobq/jobq/internal/redact"
)

// recordJSON is one task's result record as /api/result serves it, its
// text redacted.
type recordJSON struct {
	ID            string        `json:"id"`
	State         string        `json:"state"`
	ExitCode      *int          `json:"exit_code,omitempty"`
	Error         string        `json:"error,omitempty"`
	Output        string        `json:"output,omitempty"`
	Started       *time.Time    `json:"started,omitempty"`
	Finished      *time.Time    `json:"finished,omitempty"`
	Worker        string        `json:"worker,omitempty"`
	Host          string        `json:"host,omitempty"`
	DeliveryCount int           `json:"delivery_count"`
	Attempts      []attemptJSON `json:"attempts"`
}

// result serves /api/result?id=TASK: the task's result record (the error
// groups' examples link to it).
func (s *Server) result(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "id is required: /api/result?id=TASK_ID"})
		return
	}
	res, err := s.q.Result(r.Context(), id)
	if err != nil {
		apiError(w, err)
		return
	}
	out := recordJSON{ID: res.ID, State: string(res.State), ExitCode: res.ExitCode, Error: redact.String(res.Error),
		Output: redact.String(res.Output), Started: timePtr(res.Started), Finished: timePtr(res.Finished),
		Worker: res.Worker, Host: res.Host, DeliveryCount: res.DeliveryCount, Attempts: []attemptJSON{}}
	for _, a := range res.Attempts {
		aj := attemptJSON{Delivery: a.Delivery, Outcome: string(a.Outcome), Worker: a.Worker, Host: a.Host,
			Start: timePtr(a.Start), End: timePtr(a.End), ExitCode: a.ExitCode, Detail: redact.String(a.Detail)}
		if !a.Start.IsZero() && !a.End.IsZero() {
			d := a.End.Sub(a.Start).Seconds()
			aj.DurationS = &d
		}
		out.Attempts = append(out.Attempts, aj)
	}
	writeJSON(w, http.StatusOK, out)
}
