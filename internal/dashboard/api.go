package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/envmask"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/internal/statsreport"
)

// drainWindow is how far back /api/stats looks for the sample its drain
// estimate starts from.
const drainWindow = time.Minute

// maxDeadList bounds how many dead letters one /api/deadletters call lists.
const maxDeadList = 1000

// maxCommandShown bounds the command (or payload) shown per dead letter.
const maxCommandShown = 1000

// clip cuts s to at most n bytes, on a UTF-8 boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /", staticHandler())
	m.HandleFunc("GET /api/info", s.info)
	m.HandleFunc("GET /api/stats", s.stats)
	m.HandleFunc("GET /api/series", s.series)
	m.HandleFunc("GET /api/deadletters", s.deadLetters)
	m.HandleFunc("POST /api/deadletters/requeue", s.moveDead)
	m.HandleFunc("POST /api/deadletters/purge", s.moveDead)
	m.HandleFunc("POST /api/bulk/{action}", s.bulk)
	m.HandleFunc("GET /api/policies", s.policies)
	m.HandleFunc("POST /api/pause", s.pause)
	m.HandleFunc("POST /api/resume", s.pause)
	m.HandleFunc("GET /api/workers", s.workers)
	m.HandleFunc("GET /api/runtimes", s.runtimes)
	m.HandleFunc("GET /api/history", s.serveHistory)
	m.HandleFunc("GET /api/result", s.result)
	m.HandleFunc("GET /api/groups", s.serveGroups)
	s.mux = m
}

// writeJSON writes v as the response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError answers with {"error": ...}, redacted; a jobq error's code picks
// the status.
func apiError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch errcode.Of(err) {
	case errcode.InvalidArgument:
		status = http.StatusBadRequest
	case errcode.NotFound:
		status = http.StatusNotFound
	case errcode.Unimplemented:
		status = http.StatusNotImplemented
	case errcode.Unavailable:
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]string{"error": redact.String(err.Error())})
}

// info describes the queue and hands the page its CSRF token.
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	caps := s.q.Capabilities()
	features := map[string]string{}
	for _, f := range driver.AllFeatures {
		features[string(f)] = caps.Level(f).String()
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"queue":      hooks.URL(s.q),
		"name":       s.q.Name(),
		"backend":    hooks.Scheme(s.q),
		"interval_s": s.cfg.Interval.Seconds(),
		"history":    s.cfg.History,
		"features":   features,
		"csrf":       s.csrf,
	})
}

// stats serves the `stats --json` document, read now, with a drain
// estimate from the sampled history (the last minute of it). KEDA's
// metrics-api scaler reads it.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, err := s.q.Admin().Stats(ctx)
	if err != nil {
		apiError(w, err)
		return
	}
	keys, err := statsreport.LoadKeys(ctx, s.q)
	if err != nil {
		apiError(w, err)
		return
	}
	rep := statsreport.Report{Stats: st, Keys: keys}
	// The estimate runs from the oldest sample within drainWindow of the
	// last one to the counts just read, so that it is of the counts the
	// document shows.
	if hist := s.history.all(); len(hist) >= 2 {
		last := hist[len(hist)-1]
		first := hist[0]
		for _, h := range hist {
			if last.At.Sub(h.At) <= drainWindow {
				first = h
				break
			}
		}
		if now := time.Now(); first.At.Before(last.At) && first.At.Before(now) {
			rep.Drain = statsreport.Estimate(first.Stats, st, now.Sub(first.At))
		}
	}
	writeJSON(w, http.StatusOK, rep)
}

// point is one sample as /api/series lists it; counts the backend cannot
// measure are null, and the rates are null on the first point.
type point struct {
	T        int64    `json:"t"` // Unix milliseconds
	Ready    *int64   `json:"ready"`
	InFlight *int64   `json:"in_flight"`
	Delayed  *int64   `json:"delayed"`
	Dead     *int64   `json:"dead_lettered"`
	Drained  *float64 `json:"drained_per_s"`
	DeadRate *float64 `json:"dead_lettered_per_s"`
}

// series lists the sampled history with the rates between samples: the
// net drain (the decrease of ready + in flight + delayed) and the
// dead-letter rate (the increase of the dead count).
func (s *Server) series(w http.ResponseWriter, r *http.Request) {
	hist := s.history.all()
	pts := make([]point, len(hist))
	known := func(n int64, ok bool) *int64 {
		if !ok {
			return nil
		}
		return &n
	}
	for i, h := range hist {
		st := h.Stats
		p := point{T: h.At.UnixMilli(), Ready: known(st.Ready, st.Known.Ready), InFlight: known(st.InFlight, st.Known.InFlight),
			Delayed: known(st.Delayed, st.Known.Delayed), Dead: known(st.Dead, st.Known.Dead)}
		if i > 0 {
			prev := hist[i-1]
			if dt := h.At.Sub(prev.At).Seconds(); dt > 0 {
				if st.Known.Ready && st.Known.InFlight && st.Known.Delayed {
					d := float64(statsreport.Size(prev.Stats)-statsreport.Size(st)) / dt
					p.Drained = &d
				}
				if st.Known.Dead {
					d := float64(max(st.Dead-prev.Stats.Dead, 0)) / dt
					p.DeadRate = &d
				}
			}
		}
		pts[i] = p
	}
	writeJSON(w, http.StatusOK, map[string]any{"interval_s": s.cfg.Interval.Seconds(), "points": pts})
}

// deadJSON is one dead letter as /api/deadletters lists it. Text that may
// quote a credential (the command, the reason, the output tail) is
// redacted.
type deadJSON struct {
	MessageID     string        `json:"message_id"`
	TaskID        string        `json:"task_id,omitempty"`
	Command       string        `json:"command,omitempty"`
	Reason        string        `json:"reason"`
	Detail        string        `json:"detail,omitempty"`
	DeliveryCount int           `json:"delivery_count"`
	DeadAt        *time.Time    `json:"dead_at,omitempty"`
	Attempts      []attemptJSON `json:"attempts"`
}

// attemptJSON is one attempt of a dead letter's history.
type attemptJSON struct {
	Delivery  int        `json:"delivery"`
	Outcome   string     `json:"outcome"`
	Worker    string     `json:"worker,omitempty"`
	Host      string     `json:"host,omitempty"`
	Start     *time.Time `json:"start,omitempty"`
	End       *time.Time `json:"end,omitempty"`
	DurationS *float64   `json:"duration_s,omitempty"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	Detail    string     `json:"detail,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	n := 100
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > maxDeadList {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "n must be a whole number from 1 to " + strconv.Itoa(maxDeadList)})
			return
		}
	}
	dead, err := s.q.Admin().DeadLetters(r.Context(), n)
	if err != nil {
		apiError(w, err)
		return
	}
	out := make([]deadJSON, 0, len(dead))
	for _, d := range dead {
		j := deadJSON{MessageID: d.MessageID, Reason: redact.String(d.Reason), Detail: redact.String(d.Detail),
			DeliveryCount: d.DeliveryCount, DeadAt: timePtr(d.DeadAt)}
		if d.Task != nil {
			j.TaskID = d.Task.ID
			j.Command = d.Task.Command
			if j.Command == "" {
				// A payload's env shows with secret values masked.
				j.Command = string(envmask.Kwargs(d.Task.Payload))
			}
			j.Command = redact.String(clip(j.Command, maxCommandShown))
		}
		for _, a := range d.Attempts(s.q) {
			aj := attemptJSON{Delivery: a.Delivery, Outcome: string(a.Outcome), Worker: a.Worker, Host: a.Host,
				Start: timePtr(a.Start), End: timePtr(a.End), ExitCode: a.ExitCode, Detail: redact.String(a.Detail)}
			if !a.Start.IsZero() && !a.End.IsZero() {
				d := a.End.Sub(a.Start).Seconds()
				aj.DurationS = &d
			}
			j.Attempts = append(j.Attempts, aj)
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
}

// moveRequest is the body of a requeue or purge: message IDs, or all.
type moveRequest struct {
	IDs []string `json:"ids"`
	All bool     `json:"all"`
}

// moveDead requeues or purges dead letters.
func (s *Server) moveDead(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(w, r) {
		return
	}
	var req moveRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body must be JSON: {\"ids\": [MESSAGE_ID, ...]} or {\"all\": true}"})
		return
	}
	if req.All == (len(req.IDs) > 0) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "give ids or all, not both and not neither"})
		return
	}
	dl := s.q.Admin()
	var n int64
	verb := "requeued"
	if r.URL.Path == "/api/deadletters/purge" {
		verb = "purged"
		n, err = dl.PurgeDeadLetters(r.Context(), req.IDs...)
	} else {
		n, err = dl.RequeueDeadLetters(r.Context(), req.IDs...)
	}
	if err != nil {
		apiError(w, err)
		return
	}
	// A sample now shows the move on the plots without waiting.
	if err := s.Sample(r.Context()); err != nil {
		s.log.Warn("dashboard: could not read the queue's counts", "error", redact.String(err.Error()))
	}
	writeJSON(w, http.StatusOK, map[string]int64{verb: n})
}

// unavailable answers a section the backend cannot provide.
func unavailable(w http.ResponseWriter, what string, err error) {
	msg := what + " not available on this backend"
	if err != nil {
		msg += ": " + redact.String(err.Error())
	}
	writeJSON(w, http.StatusOK, map[string]any{"available": false, "message": msg})
}

// policies lists the queue's policies and, per key, the tasks in flight.
func (s *Server) policies(w http.ResponseWriter, r *http.Request) {
	keys, err := statsreport.LoadKeys(r.Context(), s.q)
	if err != nil {
		apiError(w, err)
		return
	}
	if keys == nil {
		unavailable(w, "policies are", nil)
		return
	}
	type policyJSON struct {
		Kind    string   `json:"kind"`
		Key     string   `json:"key,omitempty"`
		Limit   int64    `json:"limit"`
		PeriodS *float64 `json:"period_s,omitempty"`
		Text    string   `json:"text"`
	}
	pols := make([]policyJSON, len(keys.Policies))
	for i, p := range keys.Policies {
		pols[i] = policyJSON{Kind: string(p.Kind), Key: p.Key, Limit: p.Limit, Text: p.String()}
		if p.Period > 0 {
			ps := p.Period.Seconds()
			pols[i].PeriodS = &ps
		}
	}
	paused := keys.Pauses()
	if paused == nil {
		paused = []statsreport.Pause{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"available": true, "policies": pols, "keys": keys.JSON(), "paused": paused})
}

// pause pauses or resumes the whole queue (Admin.Pause, Admin.Resume).
// The body is optional: {"kind": K, "key": K} narrows it as the CLI's
// --kind and --key do.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(w, r) {
		return
	}
	var o jobq.PauseOptions
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(body) > 0 {
		var req struct {
			Kind string `json:"kind"`
			Key  string `json:"key"`
		}
		if err = json.Unmarshal(body, &req); err == nil {
			o.Kind, o.Key = req.Kind, req.Key
		}
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body must be empty or JSON: {\"kind\": KIND, \"key\": KEY}"})
		return
	}
	if r.URL.Path == "/api/resume" {
		had, err := s.q.Admin().Resume(r.Context(), o)
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"resumed": had})
		return
	}
	p, err := s.q.Admin().Pause(r.Context(), o)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"paused": statsreport.Pause{Kind: p.TaskKind, Key: p.Key, Since: p.Since.UTC(), By: p.By}})
}

// workers lists the registered workers with churn and lifetimes.
func (s *Server) workers(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Workers == nil {
		unavailable(w, "the worker registry is", nil)
		return
	}
	ws, err := s.cfg.Workers(r.Context())
	if errcode.Of(err) == errcode.Unimplemented {
		unavailable(w, "the worker registry is", err)
		return
	}
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"available": true, "workers": ws, "summary": summarizeWorkers(ws, time.Now())})
}

// runtimeReport is what /api/runtimes serves: the runtime distribution
// and, where result records are kept, how the followed tasks ended.
type runtimeReport struct {
	histogram
	// Outcomes counts the followed tasks by how they ended; nil where the
	// backend keeps no result records.
	Outcomes map[string]int `json:"outcomes"`
	// Following is how many tasks the dashboard waits to see end.
	Following int `json:"following"`
	// ResultsNote says why result records are not used, when they are not.
	ResultsNote string `json:"results_note,omitempty"`
}

// runtimes serves the distribution of task runtimes: the last attempts of
// the tasks the dashboard followed to their result records, and the
// attempts in the dead letters' histories.
func (s *Server) runtimes(w http.ResponseWriter, r *http.Request) {
	dead, err := s.q.Admin().DeadLetters(r.Context(), maxDeadList)
	if err != nil && errcode.Of(err) != errcode.FailedPrecondition && errcode.Of(err) != errcode.Unimplemented {
		apiError(w, err)
		return
	}
	var ds []time.Duration
	attempts := 0
	// A followed task that is one of these dead letters has its last
	// attempt in the dead letter's history: it is counted there, once.
	listed := make(map[string]bool, len(dead))
	for _, d := range dead {
		if d.Task != nil {
			listed[d.Task.ID] = true
		}
		for _, a := range d.Attempts(s.q) {
			if !a.Start.IsZero() && a.End.After(a.Start) {
				ds = append(ds, a.End.Sub(a.Start))
				attempts++
			}
		}
	}
	ended, following, off := s.results.snapshot()
	rep := runtimeReport{Following: following, ResultsNote: off}
	if off == "" {
		rep.Outcomes = map[string]int{}
		for _, e := range ended {
			rep.Outcomes[string(e.state)]++
			if e.runtime > 0 && !(e.state == driver.ResultDeadLettered && listed[e.id]) {
				ds = append(ds, e.runtime)
			}
		}
	}
	source := fmt.Sprintf("%d attempts in the dead letters' histories", attempts)
	if off == "" {
		source = fmt.Sprintf("%d tasks followed to their result records and ", len(ds)-attempts) + source
	}
	rep.histogram = newHistogram(ds, source)
	writeJSON(w, http.StatusOK, rep)
}
