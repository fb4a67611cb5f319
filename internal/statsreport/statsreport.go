// Package statsreport builds the document `jobq QUEUE stats --json` prints
// and the dashboard serves at /api/stats: the queue's counts, a drain
// estimate, and the per-key policy state. Its field names are a stable,
// documented schema (docs/autoscaling.md) that autoscalers read.
package statsreport

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Report is one stats document.
type Report struct {
	// Stats are the queue's counts.
	Stats driver.Stats
	// Drain is the measured drain estimate; nil when none was measured
	// (its fields are then left out).
	Drain *Drain
	// Keys are the policies and key counts; nil when the backend keeps no
	// policies (keys and max_depth are then left out).
	Keys *Keys
}

// Drain is a drain estimate measured over a sample.
type Drain struct {
	// Rate is the net decrease of the queue's size, in tasks per second.
	Rate float64
	// ETA is the time left at Rate; Known is false when the queue did not
	// shrink.
	ETA   time.Duration
	Known bool
}

// Keys are a queue's policies and the current state of their keys.
type Keys struct {
	Policies []driver.Policy
	Stats    []driver.KeyStat
	// PerWorker: the backend does not enforce concurrency limits itself,
	// so each worker process enforces them on its own (the counts are
	// then unknown).
	PerWorker bool
}

// The schema's top-level field names. Tests pin them: renaming one breaks
// every autoscaler configured with it.
const (
	FieldReady        = "ready"
	FieldInFlight     = "in_flight"
	FieldDelayed      = "delayed"
	FieldDeadLettered = "dead_lettered"
	FieldSize         = "size"
	FieldDrainRate    = "drain_rate_per_s"
	FieldDrainETA     = "drain_eta_s"
	FieldNewTaskWait  = "new_task_wait_s"
	FieldKeys         = "keys"
	FieldMaxDepth     = "max_depth"
	FieldPaused       = "paused"
)

// Pause is one pause as the document lists it.
type Pause struct {
	// Kind and Key are the pause's scope; both empty for the whole queue.
	Kind  string    `json:"kind,omitempty"`
	Key   string    `json:"key,omitempty"`
	Since time.Time `json:"since"`
	By    string    `json:"by"`
}

// Pauses returns the queue's pauses as the document lists them.
func (k *Keys) Pauses() []Pause {
	var out []Pause
	for _, s := range driver.Pauses(k.Policies) {
		out = append(out, Pause{Kind: s.TaskKind, Key: s.Key, Since: s.Since.UTC(), By: s.By})
	}
	return out
}

// LoadKeys reads the queue's policies and key counts; nil (and no error)
// when the backend keeps no policies.
func LoadKeys(ctx context.Context, q *jobq.Queue) (*Keys, error) {
	pols, err := q.Admin().Policies(ctx)
	if errcode.Of(err) == errcode.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ks, err := q.Admin().PolicyKeyStats(ctx)
	if err != nil {
		return nil, err
	}
	return &Keys{Policies: pols, Stats: ks, PerWorker: q.Capabilities().Level(driver.ConcurrencyLimit) != driver.Native}, nil
}

// Policy returns the policy of kind and key, if set.
func (k *Keys) Policy(kind driver.PolicyKind, key string) (driver.Policy, bool) {
	for _, p := range k.Policies {
		if p.Kind == kind && p.Key == key {
			return p, true
		}
	}
	return driver.Policy{}, false
}

// RateWait estimates how long the last waiting task of a rate key waits
// for the rate alone: counting the window's claims, the waiting tasks fill
// windows of the policy's count, and the last one starts with the window
// it falls in (the first waits for none: Admitted+Waiting <= Limit).
func RateWait(p driver.Policy, ks driver.KeyStat) time.Duration {
	if ks.Waiting <= 0 || p.Limit <= 0 {
		return 0
	}
	windows := (ks.Admitted + ks.Waiting - 1) / p.Limit
	return time.Duration(windows) * p.Period
}

// Key is one policy key as the document shows it.
type Key struct {
	Kind     string   `json:"kind"`
	Key      string   `json:"key"`
	Limit    *int64   `json:"limit,omitempty"`
	PeriodS  *float64 `json:"period_s,omitempty"`
	InFlight int64    `json:"in_flight"`
	Admitted int64    `json:"admitted_in_window"`
	// Waiting is -1 where the backend cannot count the ready tasks of a
	// key (the policy is enforced per worker process).
	Waiting int64 `json:"waiting"`
	// RateWait is RateWait in seconds, for rate keys whose waiting tasks
	// are counted; nil elsewhere.
	RateWait *float64 `json:"rate_wait_s,omitempty"`
}

// JSON returns the keys as the document lists them.
func (k *Keys) JSON() []Key {
	out := make([]Key, 0, len(k.Stats))
	for _, ks := range k.Stats {
		j := Key{Kind: string(ks.Kind), Key: ks.Key, InFlight: ks.InFlight, Admitted: ks.Admitted, Waiting: ks.Waiting}
		if p, ok := k.Policy(ks.Kind, ks.Key); ok {
			j.Limit = &p.Limit
			if p.Kind == driver.RatePolicy {
				ps := p.Period.Seconds()
				j.PeriodS = &ps
				if ks.Waiting >= 0 { // else unknown: left out, not 0
					w := RateWait(p, ks).Seconds()
					j.RateWait = &w
				}
			}
		}
		out = append(out, j)
	}
	return out
}

// Map returns the document as a map of its fields: a count the backend
// cannot measure is nil (null).
func (r Report) Map() map[string]any {
	st := r.Stats
	count := func(n int64, known bool) any {
		if !known {
			return nil
		}
		return n
	}
	var size any
	if st.Known.Ready && st.Known.InFlight && st.Known.Delayed {
		size = st.Ready + st.InFlight + st.Delayed
	}
	m := map[string]any{
		FieldReady: count(st.Ready, st.Known.Ready), FieldInFlight: count(st.InFlight, st.Known.InFlight),
		FieldDelayed: count(st.Delayed, st.Known.Delayed), FieldDeadLettered: count(st.Dead, st.Known.Dead),
		FieldSize: size,
	}
	if d := r.Drain; d != nil {
		m[FieldDrainRate] = d.Rate
		m[FieldDrainETA] = nil
		if d.Known {
			m[FieldDrainETA] = d.ETA.Seconds()
		}
		m[FieldNewTaskWait] = nil
		if d.Rate > 0 && st.Known.Ready {
			m[FieldNewTaskWait] = float64(st.Ready) / d.Rate
		}
	}
	if r.Keys != nil {
		m[FieldKeys] = r.Keys.JSON()
		if ps := r.Keys.Pauses(); len(ps) > 0 {
			m[FieldPaused] = ps
		}
		if p, ok := r.Keys.Policy(driver.MaxDepthPolicy, ""); ok {
			m[FieldMaxDepth] = p.Limit
		}
	}
	return m
}

// MarshalJSON implements json.Marshaler: the fields of Map, sorted by name.
func (r Report) MarshalJSON() ([]byte, error) { return json.Marshal(r.Map()) }

// Size is the number of tasks not dead-lettered (ready, in flight,
// delayed), as the drain estimate counts them.
func Size(st driver.Stats) int64 { return st.Ready + st.InFlight + st.Delayed }

// Estimate is the drain estimate from two samples of the counts taken
// elapsed apart.
func Estimate(first, second driver.Stats, elapsed time.Duration) *Drain {
	if elapsed <= 0 {
		return nil
	}
	d := &Drain{Rate: float64(Size(first)-Size(second)) / elapsed.Seconds()}
	switch {
	case Size(second) == 0:
		d.Known, d.ETA = true, 0
	case d.Rate > 0:
		d.Known = true
		d.ETA = time.Duration(float64(Size(second)) / d.Rate * float64(time.Second))
	}
	return d
}
