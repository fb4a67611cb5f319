package dashboard

import (
	"slices"
	"time"
)

// histogram is a distribution of durations in buckets that double from
// 100 ms, with its quantiles.
type histogram struct {
	Source  string   `json:"source"`
	Count   int      `json:"count"`
	Buckets []bucket `json:"buckets"`
	P50S    *float64 `json:"p50_s"`
	P90S    *float64 `json:"p90_s"`
	MaxS    *float64 `json:"max_s"`
}

// bucket counts the durations up to LeS seconds (and above the bucket
// before); the last bucket's LeS is null: everything longer.
type bucket struct {
	LeS   *float64 `json:"le_s"`
	Count int      `json:"count"`
}

// bucketBounds are the bucket limits: 0.1s doubling to about 1.8 hours.
var bucketBounds = func() []time.Duration {
	var out []time.Duration
	for d := 100 * time.Millisecond; d <= 2*time.Hour; d *= 2 {
		out = append(out, d)
	}
	return out
}()

func newHistogram(ds []time.Duration, source string) histogram {
	h := histogram{Source: source, Count: len(ds), Buckets: make([]bucket, len(bucketBounds)+1)}
	for i, b := range bucketBounds {
		s := b.Seconds()
		h.Buckets[i].LeS = &s
	}
	for _, d := range ds {
		i, _ := slices.BinarySearch(bucketBounds, d)
		h.Buckets[i].Count++
	}
	if len(ds) == 0 {
		return h
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	q := func(p float64) *float64 {
		s := sorted[min(int(p*float64(len(sorted))), len(sorted)-1)].Seconds()
		return &s
	}
	h.P50S, h.P90S = q(0.5), q(0.9)
	h.MaxS = q(1)
	return h
}

// workerSummary is what the worker list says about the fleet: how many are
// live, churn over the last hour, and how long workers lived.
type workerSummary struct {
	Live            int              `json:"live"`
	Vanished        int              `json:"vanished"`
	Withdrawn       int              `json:"withdrawn"`
	StartedLastHour int              `json:"started_last_hour"`
	EndedLastHour   int              `json:"ended_last_hour"`
	Lifetimes       *lifetimeSummary `json:"lifetimes,omitempty"`
}

// lifetimeSummary summarises the lifetimes of the workers that ended.
type lifetimeSummary struct {
	Count int     `json:"count"`
	P50S  float64 `json:"p50_s"`
	MaxS  float64 `json:"max_s"`
}

func summarizeWorkers(ws []Worker, now time.Time) workerSummary {
	var s workerSummary
	var lives []time.Duration
	hourAgo := now.Add(-time.Hour)
	for _, w := range ws {
		switch w.State {
		case "live":
			s.Live++
		case "vanished":
			s.Vanished++
		case "withdrawn":
			s.Withdrawn++
		}
		if w.Started.After(hourAgo) {
			s.StartedLastHour++
		}
		if w.State != "live" {
			if w.Heartbeat.After(hourAgo) {
				s.EndedLastHour++
			}
			if !w.Started.IsZero() && w.Heartbeat.After(w.Started) {
				lives = append(lives, w.Heartbeat.Sub(w.Started))
			}
		}
	}
	if len(lives) > 0 {
		slices.Sort(lives)
		s.Lifetimes = &lifetimeSummary{Count: len(lives), P50S: lives[(len(lives)-1)/2].Seconds(), MaxS: lives[len(lives)-1].Seconds()}
	}
	return s
}
