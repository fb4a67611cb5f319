package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/redact"
)

// bulkRequest is the body of POST /api/bulk/{action}: a jobq.Filter. Since
// and until are a duration ago ("12h", "90m") or an RFC 3339 time.
type bulkRequest struct {
	State    string `json:"state"`
	Kind     string `json:"kind"`
	Key      string `json:"key"`
	ExitCode *int   `json:"exit_code"`
	Error    string `json:"error"`
	Since    string `json:"since"`
	Until    string `json:"until"`
	All      bool   `json:"all"`
	DryRun   bool   `json:"dry_run"`
}

// bulkJSON is what a bulk action answers.
type bulkJSON struct {
	Action  string `json:"action"`
	Scanned int64  `json:"scanned"`
	Matched int64  `json:"matched"`
	Done    int64  `json:"done"`
	Pending int64  `json:"pending"`
	DryRun  bool   `json:"dry_run"`
	Partial string `json:"partial,omitempty"`
}

// bulk runs requeue, cancel or purge by filter (Admin.RequeueWhere,
// CancelWhere, PurgeWhere). The page asks for a dry run first, shows its
// count in the confirmation, and only then sends the real run.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(w, r) {
		return
	}
	action := r.PathValue("action")
	ad := s.q.Admin()
	run := map[string]func(jobq.Filter) (jobq.BulkResult, error){
		"requeue": func(f jobq.Filter) (jobq.BulkResult, error) { return ad.RequeueWhere(r.Context(), f) },
		"cancel":  func(f jobq.Filter) (jobq.BulkResult, error) { return ad.CancelWhere(r.Context(), f) },
		"purge":   func(f jobq.Filter) (jobq.BulkResult, error) { return ad.PurgeWhere(r.Context(), f) },
	}[action]
	if run == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("unknown bulk action %q: use requeue, cancel or purge", action)})
		return
	}
	var req bulkRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `the body must be JSON: {"state", "kind", "key", "exit_code", "error", "since", "until", "all", "dry_run"}`})
		return
	}
	f := jobq.Filter{State: req.State, Kind: req.Kind, Key: req.Key, ExitCode: req.ExitCode, ErrorContains: req.Error, All: req.All, DryRun: req.DryRun}
	now := time.Now()
	for _, b := range []struct {
		name, val string
		t         *time.Time
	}{{"since", req.Since, &f.Since}, {"until", req.Until, &f.Until}} {
		if *b.t, err = parseWhen(now, b.val); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%s %q: %v", b.name, b.val, err)})
			return
		}
	}
	res, err := run(f)
	if err != nil {
		apiError(w, err)
		return
	}
	if !f.DryRun && res.Done > 0 {
		if err := s.Sample(r.Context()); err != nil {
			s.log.Warn("dashboard: could not read the queue's counts", "error", redact.String(err.Error()))
		}
	}
	writeJSON(w, http.StatusOK, bulkJSON{Action: action, Scanned: res.Scanned, Matched: res.Matched, Done: res.Done,
		Pending: res.Pending, DryRun: f.DryRun, Partial: res.Partial})
}

// parseWhen reads a duration ago or an RFC 3339 time; "" is no bound.
func parseWhen(now time.Time, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("neither a duration ago (12h, 90m) nor an RFC 3339 time (2026-11-27T18:00:00Z)")
}
