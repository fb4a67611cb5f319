package worker

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// registryTimeout bounds one write of the worker's record.
const registryTimeout = 10 * time.Second

// lateWithdrawTimeout bounds the withdrawal of a worker whose stop timeout
// has passed.
const lateWithdrawTimeout = time.Second

// registryPurgeEvery is how often a worker purges the records of workers
// gone for longer than driver.WorkerRetention (besides once at start).
const registryPurgeEvery = time.Hour

// registry keeps this worker's record in the queue's worker registry: it
// announces the worker when Run starts, heartbeats with the tasks it runs
// and its CPU and memory use, and withdraws the worker when Run returns
// (docs/worker-registry.md).
type registry struct {
	w   *Worker
	log *slog.Logger

	mu      sync.Mutex
	usage   usage // at the previous heartbeat, for the CPU percentage
	failing bool  // the last write failed (logged once until it recovers)
}

func newRegistry(w *Worker) *registry {
	return &registry{w: w, log: w.log}
}

// on reports whether the worker keeps a record in the registry: not when
// the registry is off (HeartbeatInterval negative) or the backend keeps
// none.
func (r *registry) on() bool {
	return r.w.o.HeartbeatInterval >= 0 && r.w.q.Capabilities().Level(driver.WorkerRegistry) != driver.Unsupported
}

// start announces the worker and heartbeats until the returned function is
// called, which withdraws it. With the registry off (HeartbeatInterval
// negative) or unsupported by the backend it does nothing.
func (r *registry) start() (withdraw func()) {
	interval := r.w.o.HeartbeatInterval
	if !r.on() {
		if interval >= 0 {
			r.log.Debug("the backend keeps no worker registry: this worker is not listed by `jobq workers`")
		}
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	var unimplemented bool // set before done closes
	go func() {
		defer close(done)
		// The announcement goes out beside the first claims, not before
		// them: reading the process tree's usage (usage_linux.go) and the
		// engine's write would otherwise delay every worker's first task.
		if err := r.put(false); err != nil && errors.Is(err, errcode.Unimplemented) {
			unimplemented = true
			return
		}
		r.purge()
		t := time.NewTicker(interval)
		defer t.Stop()
		lastPurge := time.Now()
		for {
			select {
			case <-t.C:
				_ = r.put(false)
				if time.Since(lastPurge) >= registryPurgeEvery {
					lastPurge = time.Now()
					r.purge()
				}
			case <-stop:
				return
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		if !unimplemented {
			_ = r.put(true)
		}
	}
}

// minCPUWindow is the shortest interval a CPU percentage is computed over:
// CPU times come in 10 ms ticks, so over a few milliseconds one tick reads
// as more than a core.
const minCPUWindow = time.Second

// cpuPercent is the share of one core used between two readings, at most
// ncpu cores; 0 when the readings are less than minCPUWindow apart (the
// first heartbeat, or a worker that ran for milliseconds).
func cpuPercent(prev, cur usage, ncpu int) float64 {
	if prev.at.IsZero() || cur.at.Sub(prev.at) < minCPUWindow || cur.cpu < prev.cpu {
		return 0
	}
	pct := 100 * (cur.cpu - prev.cpu).Seconds() / cur.at.Sub(prev.at).Seconds()
	return min(pct, float64(100*ncpu))
}

// tasks returns the IDs of the tasks whose handlers run, sorted.
func (r *registry) tasks() []string {
	tasks, _ := r.w.inflight.ids()
	slices.Sort(tasks)
	return tasks
}

// info is the worker's record now.
func (r *registry) info() *jobq.WorkerInfo {
	w := r.w
	now := time.Now()
	u := readUsage()
	tasks := r.tasks()
	r.mu.Lock()
	prev := r.usage
	r.usage = u
	r.mu.Unlock()
	pct := cpuPercent(prev, u, runtime.NumCPU())
	c := w.Counts()
	wt := w.WorkTotals()
	return &jobq.WorkerInfo{
		Env: w.o.EnvLabel, WorkSeconds: wt.Done.Seconds(), LostSeconds: wt.Lost.Seconds(), SavedSeconds: wt.Saved.Seconds(),
		Preemptions: wt.Preemptions,
		ID:          w.o.WorkerID, Host: w.host, PID: os.Getpid(), Started: w.started, Version: w.o.Version,
		Tasks: tasks, Done: c.Done, Failed: c.Failed,
		CPUSeconds: u.cpu.Seconds(), CPUPercent: pct, RSSBytes: u.rss,
		Interval: w.o.HeartbeatInterval, Heartbeat: now,
	}
}

// put writes the record: an announcement or heartbeat, or the withdrawal.
// A failure is logged at WARN once, then at DEBUG until a write succeeds.
func (r *registry) put(withdraw bool) error {
	parent, timeout := r.w.writeCtx, registryTimeout
	if withdraw && parent.Err() != nil {
		// Run's writes were cut off at the stop timeout; the withdrawal
		// still gets a moment, or the worker would be listed as vanished
		// instead of withdrawn, but no more: Run returns by the timeout.
		parent, timeout = context.WithoutCancel(parent), lateWithdrawTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	info := r.info()
	var err error
	if withdraw {
		err = hooks.WithdrawWorker(ctx, r.w.q, info)
	} else {
		err = hooks.AnnounceWorker(ctx, r.w.q, info)
	}
	r.mu.Lock()
	was := r.failing
	r.failing = err != nil
	r.mu.Unlock()
	switch {
	case err != nil && errors.Is(err, errcode.Unimplemented):
		r.log.Debug("the backend keeps no worker registry: this worker is not listed by `jobq workers`", "error", err)
	case err != nil && !was && errors.Is(err, errcode.PermissionDenied) && r.w.q.Capabilities().Level(driver.Results) == driver.Emulated:
		// On Azure the registry and the result records share one container:
		// tasks are settled without their records (jobq's presettle).
		r.log.Error("the credentials may not write the result container, which keeps the worker registry and the tasks' result records: this worker is not listed by `jobq workers`, and its tasks are settled without result records (result, wait and push --wait do not see them); give the identity Blob Storage rights on the container (\"Storage Blob Data Contributor\", or a SAS for the blob service)", "error", err)
	case err != nil && !was:
		r.log.Warn("could not write this worker's record to the worker registry; tasks are not affected", "error", err)
	case err != nil:
		r.log.Debug("worker registry write failed again", "error", err)
	case was:
		r.log.Info("worker registry writes work again")
	}
	return err
}

// purge deletes the records of workers gone for longer than the retention.
func (r *registry) purge() {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	if n, err := r.w.q.Admin().PurgeWorkers(ctx, time.Now().Add(-driver.WorkerRetention)); err != nil {
		r.log.Debug("purging old worker records failed", "error", err)
	} else if n > 0 {
		r.log.Debug("purged old worker records", "count", n)
	}
}

// defaultVersion is the main module's version from the build info.
func defaultVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}
