package jobq

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// WorkerState says whether a registered worker is still there.
type WorkerState string

// The states of a WorkerInfo.
const (
	// WorkerLive: the worker heartbeated within its TTL.
	WorkerLive WorkerState = "live"
	// WorkerVanished: the worker stopped heartbeating without withdrawing
	// (killed, its machine preempted, cut off from the engine).
	WorkerVanished WorkerState = "vanished"
	// WorkerWithdrawn: the worker said it was leaving when it exited.
	WorkerWithdrawn WorkerState = "withdrawn"
)

// workerTTLBeats is how many heartbeat intervals may pass without a
// heartbeat before a worker counts as vanished (unless the lister sets a
// TTL).
const workerTTLBeats = 3

// WorkerInfo is one worker in a queue's worker registry: what it announced
// about itself at its last heartbeat, and whether it is still there.
type WorkerInfo struct {
	// ID names the worker (worker.Options.WorkerID: the host name and the
	// process ID by default).
	ID string `json:"id"`
	// Host and PID locate the worker's process.
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Started is when the worker started.
	Started time.Time `json:"started"`
	// Version is the jobq (or program) version the worker runs.
	Version string `json:"version,omitempty"`
	// Tasks are the IDs of the tasks the worker was running at its last
	// heartbeat.
	Tasks []string `json:"tasks"`
	// Done and Failed are the worker's running totals of tasks completed
	// and attempts failed.
	Done   int64 `json:"done"`
	Failed int64 `json:"failed"`
	// CPUSeconds is the CPU time (user and system) the worker process has
	// used; CPUPercent is its use over the last heartbeat interval, where
	// 100 is one core. Zero where the platform cannot tell.
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUPercent float64 `json:"cpu_percent"`
	// RSSBytes is the worker process's resident memory; zero where the
	// platform cannot tell.
	RSSBytes int64 `json:"rss_bytes"`
	// Env is the worker's environment label (worker.Options.EnvLabel: the
	// cloud VM size and region, or the host name).
	Env string `json:"env,omitempty"`
	// WorkSeconds is the time the worker's handlers ran; LostSeconds the
	// work of stopped attempts (preempted, signalled) that no checkpoint
	// kept; SavedSeconds the work of stopped attempts that checkpoints
	// kept for the next attempt; Preemptions the attempts a preemption
	// notice stopped (docs/checkpoints.md).
	WorkSeconds  float64 `json:"work_s,omitempty"`
	LostSeconds  float64 `json:"lost_s,omitempty"`
	SavedSeconds float64 `json:"saved_s,omitempty"`
	Preemptions  int64   `json:"preemptions,omitempty"`
	// Interval is how often the worker heartbeats.
	Interval time.Duration `json:"interval_ns"`
	// Heartbeat is when the worker last wrote its record. Listed, it is on
	// the lister's clock where the engine keeps heartbeats on its own
	// (Postgres, Redis), else on the worker's. AnnounceWorker sets it to
	// now when it is zero.
	Heartbeat time.Time `json:"heartbeat"`
	// State is set by Admin.Workers: live, vanished or withdrawn.
	State WorkerState `json:"state"`
}

// Uptime is how long the worker has run: until now for a live worker,
// until its last heartbeat for one that withdrew or vanished (its
// lifetime, as far as the registry knows).
func (w *WorkerInfo) Uptime() time.Duration {
	end := w.Heartbeat
	if w.State == WorkerLive {
		end = time.Now()
	}
	if w.Started.IsZero() || end.Before(w.Started) {
		return 0
	}
	return end.Sub(w.Started)
}

// workerData is what a WorkerRecord's Data holds: WorkerInfo without the
// fields the record keeps itself.
type workerData struct {
	Host       string    `json:"host"`
	PID        int       `json:"pid"`
	Started    time.Time `json:"started"`
	Version    string    `json:"version,omitempty"`
	Tasks      []string  `json:"tasks,omitempty"`
	Done       int64     `json:"done,omitempty"`
	Failed     int64     `json:"failed,omitempty"`
	CPUSeconds float64   `json:"cpu_s,omitempty"`
	CPUPercent float64   `json:"cpu_pct,omitempty"`
	RSSBytes   int64     `json:"rss,omitempty"`
	IntervalMS int64     `json:"interval_ms,omitempty"`
	Env        string    `json:"env,omitempty"`
	WorkS      float64   `json:"work_s,omitempty"`
	LostS      float64   `json:"lost_s,omitempty"`
	SavedS     float64   `json:"saved_s,omitempty"`
	Preempted  int64     `json:"preemptions,omitempty"`
}

// WorkersOptions tune Admin.Workers.
type WorkersOptions struct {
	// TTL is how long a worker may go without a heartbeat before it counts
	// as vanished. Zero means three of the worker's own heartbeat
	// intervals (30s with the default interval).
	TTL time.Duration
	// Withdrawn includes the workers that withdrew (within
	// driver.WorkerRetention); by default only live and vanished ones are listed.
	Withdrawn bool
}

// registry returns the driver's worker registry, or an Unimplemented error
// when the backend declares none.
func (q *Queue) registry(op string) (driver.WorkerStore, error) {
	if err := q.checkOpen(op); err != nil {
		return nil, err
	}
	if err := q.degrade(op, driver.WorkerRegistry); err != nil {
		return nil, err
	}
	r, ok := q.drv.(driver.WorkerStore)
	if !ok {
		return nil, &Error{Code: errcode.Unimplemented, Op: op, Queue: q.url,
			Msg: "backend " + q.backend() + " declares worker-registry but its driver keeps no worker records"}
	}
	return r, nil
}

// announceWorker writes w's record to the queue's worker registry: a worker
// calls it when it starts and again at every heartbeat (package worker
// does). It fails with Unimplemented when the backend keeps no worker
// registry (see the worker-registry feature).
func (q *Queue) announceWorker(ctx context.Context, w *WorkerInfo) error {
	return q.putWorker(ctx, "announce worker", w, false)
}

// withdrawWorker writes w's last record, marked as withdrawn: a worker calls
// it when it exits, so that it is not taken for one that vanished.
func (q *Queue) withdrawWorker(ctx context.Context, w *WorkerInfo) error {
	return q.putWorker(ctx, "withdraw worker", w, true)
}

func (q *Queue) putWorker(ctx context.Context, op string, w *WorkerInfo, withdrawn bool) error {
	r, err := q.registry(op)
	if err != nil {
		return err
	}
	if w == nil || w.ID == "" {
		return errorf(errcode.InvalidArgument, op, "the worker has no ID; set WorkerInfo.ID")
	}
	hb := w.Heartbeat
	if hb.IsZero() {
		hb = time.Now()
	}
	data, err := json.Marshal(workerData{Host: w.Host, PID: w.PID, Started: w.Started, Version: w.Version,
		Tasks: w.Tasks, Done: w.Done, Failed: w.Failed, CPUSeconds: w.CPUSeconds, CPUPercent: w.CPUPercent,
		RSSBytes: w.RSSBytes, IntervalMS: w.Interval.Milliseconds(),
		Env: w.Env, WorkS: w.WorkSeconds, LostS: w.LostSeconds, SavedS: w.SavedSeconds, Preempted: w.Preemptions})
	if err != nil {
		return &Error{Code: errcode.Internal, Op: op, Queue: q.url, Err: err}
	}
	rec := &driver.WorkerRecord{ID: w.ID, Heartbeat: hb.UTC().Truncate(time.Millisecond), Withdrawn: withdrawn, Data: data}
	return q.wrap(op, r.PutWorker(ctx, rec))
}

// PurgeWorkers deletes the worker records whose last heartbeat is before
// before and returns how many it deleted (0 where the engine expires them
// by itself). Workers call it now and then with driver.WorkerRetention ago, so
// that records never pile up; a time in the future empties the registry.
func (a *Admin) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	q := a.q
	const op = "purge workers"
	r, err := q.registry(op)
	if err != nil {
		return 0, err
	}
	n, err := r.PurgeWorkers(ctx, before)
	return n, q.wrap(op, err)
}

// Workers lists the queue's workers that heartbeated within
// driver.WorkerRetention: the live ones and the ones that vanished without
// withdrawing (plus the withdrawn ones with opts.Withdrawn), live ones
// first, each group by start time. It fails with Unimplemented when the
// backend keeps no worker registry.
func (a *Admin) Workers(ctx context.Context, opts WorkersOptions) ([]*WorkerInfo, error) {
	q := a.q
	const op = "workers"
	r, err := q.registry(op)
	if err != nil {
		return nil, err
	}
	if opts.TTL < 0 {
		return nil, errorf(errcode.InvalidArgument, op, "TTL is %v; use 0 (three heartbeat intervals) or a positive duration", opts.TTL)
	}
	now := time.Now()
	since := now.Add(-driver.WorkerRetention)
	recs, err := r.ListWorkers(ctx, since)
	if err != nil {
		return nil, q.wrap(op, err)
	}
	out := make([]*WorkerInfo, 0, len(recs))
	for _, rec := range recs {
		if rec.Heartbeat.Before(since) {
			continue
		}
		w, err := decodeWorker(rec)
		if err != nil {
			q.log.Warn("jobq: skipping a worker record that cannot be read", "worker", rec.ID, "error", err)
			continue
		}
		ttl := opts.TTL
		if ttl == 0 {
			ttl = workerTTLBeats * cmp.Or(w.Interval, driver.DefaultWorkerHeartbeat)
		}
		switch {
		case rec.Withdrawn:
			w.State = WorkerWithdrawn
		case now.Sub(rec.Heartbeat) > ttl:
			w.State = WorkerVanished
		default:
			w.State = WorkerLive
		}
		if w.State == WorkerWithdrawn && !opts.Withdrawn {
			continue
		}
		out = append(out, w)
	}
	rank := map[WorkerState]int{WorkerLive: 0, WorkerVanished: 1, WorkerWithdrawn: 2}
	slices.SortFunc(out, func(a, b *WorkerInfo) int {
		if d := rank[a.State] - rank[b.State]; d != 0 {
			return d
		}
		if c := a.Started.Compare(b.Started); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// decodeWorker reads a record into a WorkerInfo (without State).
func decodeWorker(rec *driver.WorkerRecord) (*WorkerInfo, error) {
	var d workerData
	if err := json.Unmarshal(rec.Data, &d); err != nil {
		return nil, fmt.Errorf("decode worker record %q: %w", rec.ID, err)
	}
	return &WorkerInfo{ID: rec.ID, Host: d.Host, PID: d.PID, Started: d.Started, Version: d.Version,
		Tasks: d.Tasks, Done: d.Done, Failed: d.Failed, CPUSeconds: d.CPUSeconds, CPUPercent: d.CPUPercent,
		RSSBytes: d.RSSBytes, Interval: time.Duration(d.IntervalMS) * time.Millisecond, Heartbeat: rec.Heartbeat,
		Env: d.Env, WorkSeconds: d.WorkS, LostSeconds: d.LostS, SavedSeconds: d.SavedS, Preemptions: d.Preempted}, nil
}
