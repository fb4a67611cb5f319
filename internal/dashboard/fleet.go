package dashboard

import (
	"context"
	"slices"
	"time"

	"github.com/jobq/jobq/internal/redact"
)

// fleetReport is what the worker registry says about the fleet over the
// last day (the registry keeps a worker's record for a day after its last
// heartbeat): workers started and ended per hour, the lifetimes of the
// workers that ended, and each worker's CPU and memory at its last
// heartbeat.
type fleetReport struct {
	Available bool          `json:"available"`
	Message   string        `json:"message,omitempty"`
	Churn     []churnBucket `json:"churn"`
	Lifetimes histogram     `json:"lifetimes"`
	Workers   []workerUse   `json:"workers"`
}

// churnBucket is one hour of churn.
type churnBucket struct {
	T       int64 `json:"t"` // start, Unix ms
	Started int   `json:"started"`
	Ended   int   `json:"ended"`
}

// workerUse is a worker's CPU and memory at its last heartbeat.
type workerUse struct {
	ID         string  `json:"id"`
	Host       string  `json:"host"`
	State      string  `json:"state"`
	CPUPercent float64 `json:"cpu_percent"`
	RSSBytes   int64   `json:"rss_bytes"`
}

// fleetHours is how far back the churn goes.
const fleetHours = 24

// maxFleetWorkers bounds the workers whose use the page plots (the
// busiest first).
const maxFleetWorkers = 40

// fleet reads the worker registry; nil when the dashboard has none.
func (s *Server) fleet(ctx context.Context, now time.Time) *fleetReport {
	if s.cfg.Workers == nil {
		return &fleetReport{Message: "the worker registry is not available on this backend"}
	}
	ws, err := s.cfg.Workers(ctx)
	if err != nil {
		return &fleetReport{Message: "the worker registry could not be read: " + redact.String(err.Error())}
	}
	return summarizeFleet(ws, now)
}

// summarizeFleet builds the fleet report of ws at now.
func summarizeFleet(ws []Worker, now time.Time) *fleetReport {
	f := &fleetReport{Available: true, Churn: make([]churnBucket, fleetHours)}
	end := now.Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-fleetHours * time.Hour)
	for i := range f.Churn {
		f.Churn[i].T = start.Add(time.Duration(i) * time.Hour).UnixMilli()
	}
	hour := func(t time.Time) int {
		if t.Before(start) || !t.Before(end) {
			return -1
		}
		return int(t.Sub(start) / time.Hour)
	}
	var lives []time.Duration
	for _, w := range ws {
		if i := hour(w.Started); i >= 0 {
			f.Churn[i].Started++
		}
		if w.State != "live" {
			if i := hour(w.Heartbeat); i >= 0 {
				f.Churn[i].Ended++
			}
			if !w.Started.IsZero() && w.Heartbeat.After(w.Started) {
				lives = append(lives, w.Heartbeat.Sub(w.Started))
			}
		}
		f.Workers = append(f.Workers, workerUse{ID: w.ID, Host: w.Host, State: w.State, CPUPercent: w.CPUPercent, RSSBytes: w.RSSBytes})
	}
	f.Lifetimes = newHistogram(lives, "workers that ended in the last day")
	slices.SortFunc(f.Workers, func(a, b workerUse) int {
		if a.State == "live" && b.State != "live" {
			return -1
		}
		if b.State == "live" && a.State != "live" {
			return 1
		}
		return compareStrings(a.ID, b.ID)
	})
	if len(f.Workers) > maxFleetWorkers {
		f.Workers = f.Workers[:maxFleetWorkers]
	}
	return f
}
