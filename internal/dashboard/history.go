package dashboard

import (
	"context"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// The history panels come from the result records (Admin.ResultHistory,
// added up by the engine or by a paged scan) and the worker registry, so
// they show what happened before the dashboard started. An aggregate is
// kept for historyTTL, so that the page's refreshes and several viewers
// cost the engine one aggregate per window per historyTTL; the newest
// bucket grows at each recomputation (historyCache says when).

// historyTTL is how long an aggregate is served before it is recomputed.
const historyTTL = 15 * time.Second

// historyWindow is one window the page offers: its length and bucket.
type historyWindow struct {
	name   string
	span   time.Duration
	bucket time.Duration
}

// historyWindows are the windows /api/history?window= takes; the first is
// the default.
var historyWindows = []historyWindow{
	{"24h", 24 * time.Hour, time.Hour},
	{"6h", 6 * time.Hour, 10 * time.Minute},
	{"7d", 7 * 24 * time.Hour, time.Hour},
}

// Error groups and examples the panels show.
const (
	historyErrorGroups = 20
	historyExamples    = 3
)

// historyReport is what /api/history serves.
type historyReport struct {
	Available bool      `json:"available"`
	Message   string    `json:"message,omitempty"`
	Window    string    `json:"window"`
	Level     string    `json:"level"`
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"`
	BucketS   float64   `json:"bucket_s"`
	// TookMS is how long the aggregate took.
	TookMS  int64           `json:"took_ms"`
	Buckets []historyBucket `json:"buckets"`
	Totals  historyTotals   `json:"totals"`
	// ByEnv counts the interrupted attempts per environment (the worker's
	// environment label, else its host), most first.
	ByEnv   []envCounts  `json:"by_env"`
	Runtime runtimeStats `json:"runtime"`
	Errors  []errorJSON  `json:"errors"`
	Fleet   *fleetReport `json:"fleet,omitempty"`
}

// historyBucket is one time bucket of the history plots.
type historyBucket struct {
	T            int64 `json:"t"` // start, Unix ms
	Succeeded    int64 `json:"succeeded"`
	DeadLettered int64 `json:"dead_lettered"`
	Cancelled    int64 `json:"cancelled"`
	runtimeStats
	Interruptions
}

// runtimeStats are the runtime quantiles of some records: p50 and p90 to
// within the runtime bins (half an octave), max exact.
type runtimeStats struct {
	Count int64    `json:"runtime_count"`
	P50S  *float64 `json:"p50_s"`
	P90S  *float64 `json:"p90_s"`
	MaxS  *float64 `json:"max_s"`
}

// Interruptions count the attempts that ended before their task did, by
// outcome.
type Interruptions struct {
	Preempted    int64 `json:"preempted"`
	Requeued     int64 `json:"requeued"`
	LeaseExpired int64 `json:"lease_expired"`
	Failed       int64 `json:"failed"`
}

// add counts n attempts of outcome; it reports whether the outcome is one
// Interruptions counts.
func (c *Interruptions) add(outcome string, n int64) bool {
	switch outcome {
	case "preempted":
		c.Preempted += n
	case "requeued":
		c.Requeued += n
	case "lease-expired":
		c.LeaseExpired += n
	case "failure":
		c.Failed += n
	default:
		return false
	}
	return true
}

// historyTotals are the window's totals.
type historyTotals struct {
	Succeeded    int64 `json:"succeeded"`
	DeadLettered int64 `json:"dead_lettered"`
	Cancelled    int64 `json:"cancelled"`
	Interruptions
}

// envCounts are one environment's interrupted attempts.
type envCounts struct {
	Env string `json:"env"`
	Interruptions
}

// errorJSON is one error group.
type errorJSON struct {
	ExitCode  *int      `json:"exit_code"`
	FirstLine string    `json:"first_line"`
	Count     int64     `json:"count"`
	Last      time.Time `json:"last"`
	Examples  []string  `json:"examples"`
}

// serveHistory serves /api/history?window=24h|6h|7d.
func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request) {
	win := historyWindows[0]
	if name := r.URL.Query().Get("window"); name != "" {
		i := slices.IndexFunc(historyWindows, func(h historyWindow) bool { return h.name == name })
		if i < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "window must be one of 24h, 6h, 7d"})
			return
		}
		win = historyWindows[i]
	}
	rep, err := s.hist.get(r.Context(), win.name, func(ctx context.Context) (*historyReport, error) {
		return s.computeHistory(ctx, win, time.Now())
	})
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// computeHistory adds up win's records and reads the worker registry.
func (s *Server) computeHistory(ctx context.Context, win historyWindow, now time.Time) (*historyReport, error) {
	// Buckets start on whole buckets (whole hours in UTC), the last one
	// holds now.
	until := now.Truncate(win.bucket).Add(win.bucket)
	p := driver.HistoryParams{Since: until.Add(-win.span), Until: until, Bucket: win.bucket,
		Examples: historyExamples, ErrorGroups: historyErrorGroups}
	rep := &historyReport{Available: true, Window: win.name, Since: p.Since.UTC(), Until: p.Until.UTC(), BucketS: win.bucket.Seconds(),
		Level: s.q.Capabilities().Level(driver.ResultHistory).String()}
	rep.Fleet = s.fleet(ctx, now)
	began := time.Now()
	h, err := s.q.Admin().ResultHistory(ctx, p)
	rep.TookMS = time.Since(began).Milliseconds()
	if errcode.Of(err) == errcode.Unimplemented {
		rep.Available = false
		rep.Message = "the history of ended tasks is not available on this backend: " + redact.String(err.Error())
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	fillHistory(rep, h, p)
	return rep, nil
}

// fillHistory turns the sums into the report's buckets, totals, groups.
func fillHistory(rep *historyReport, h *driver.History, p driver.HistoryParams) {
	n := p.NumBuckets()
	rep.Buckets = make([]historyBucket, n)
	bins := make([]map[int]int64, n)
	maxes := make([]time.Duration, n)
	all := map[int]int64{}
	var allMax time.Duration
	for i := range rep.Buckets {
		rep.Buckets[i].T = p.Since.Add(time.Duration(i) * p.Bucket).UnixMilli()
		bins[i] = map[int]int64{}
	}
	for _, e := range h.Ends {
		if e.Bucket < 0 || e.Bucket >= n {
			continue
		}
		b := &rep.Buckets[e.Bucket]
		switch e.State {
		case driver.ResultSucceeded:
			b.Succeeded += e.Count
			rep.Totals.Succeeded += e.Count
		case driver.ResultDeadLettered:
			b.DeadLettered += e.Count
			rep.Totals.DeadLettered += e.Count
		case driver.ResultCancelled:
			b.Cancelled += e.Count
			rep.Totals.Cancelled += e.Count
		}
		if e.RuntimeBin >= 0 && e.State != driver.ResultCancelled {
			bins[e.Bucket][e.RuntimeBin] += e.Count
			all[e.RuntimeBin] += e.Count
			maxes[e.Bucket] = max(maxes[e.Bucket], e.MaxRuntime)
			allMax = max(allMax, e.MaxRuntime)
		}
	}
	for i := range rep.Buckets {
		rep.Buckets[i].runtimeStats = quantiles(bins[i], maxes[i])
	}
	rep.Runtime = quantiles(all, allMax)
	envs := map[string]*envCounts{}
	for _, a := range h.Attempts {
		if a.Bucket < 0 || a.Bucket >= n || !rep.Buckets[a.Bucket].add(a.Outcome, a.Count) {
			continue
		}
		rep.Totals.add(a.Outcome, a.Count)
		e := envs[a.Env]
		if e == nil {
			e = &envCounts{Env: a.Env}
			envs[a.Env] = e
		}
		e.add(a.Outcome, a.Count)
	}
	for _, e := range envs {
		rep.ByEnv = append(rep.ByEnv, *e)
	}
	slices.SortFunc(rep.ByEnv, func(a, b envCounts) int {
		if d := total(b.Interruptions) - total(a.Interruptions); d != 0 {
			return int(math.Copysign(1, float64(d)))
		}
		return compareStrings(a.Env, b.Env)
	})
	rep.Errors = []errorJSON{}
	for _, g := range h.Errors {
		rep.Errors = append(rep.Errors, errorJSON{ExitCode: g.ExitCode, FirstLine: redact.String(g.FirstLine), Count: g.Count, Last: g.Last.UTC(), Examples: g.Examples})
	}
}

// total is every interruption of c.
func total(c Interruptions) int64 { return c.Preempted + c.Requeued + c.LeaseExpired + c.Failed }

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// quantiles are the p50, p90 and max of runtimes counted by bin: a
// quantile is the geometric middle of its bin, at most the max.
func quantiles(bins map[int]int64, longest time.Duration) runtimeStats {
	var n int64
	keys := make([]int, 0, len(bins))
	for k, c := range bins {
		n += c
		keys = append(keys, k)
	}
	if n == 0 {
		return runtimeStats{}
	}
	slices.Sort(keys)
	at := func(q float64) *float64 {
		rank := int64(math.Ceil(q * float64(n)))
		var seen int64
		for _, k := range keys {
			seen += bins[k]
			if seen >= rank {
				lo, hi := driver.RuntimeBinBounds(k)
				v := math.Sqrt(max(lo.Seconds(), 0.01) * hi.Seconds())
				v = math.Min(v, longest.Seconds())
				return &v
			}
		}
		return nil
	}
	m := longest.Seconds()
	return runtimeStats{Count: n, P50S: at(0.5), P90S: at(0.9), MaxS: &m}
}
