package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/postgres" // the backends measured
	_ "github.com/jobq/jobq/backends/redis"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/worker"
)

// result is what one run measured, for the report and the test.
type result struct {
	yardstick   float64       // tasks/s draining a -window backlog
	pushRates   []float64     // tasks/s per tenth of the backlog
	idle, peak  weight        // the new, empty queue and with the backlog queued
	perTask     float64       // the queue's storage per queued task: (peak-idle)/n
	perRecord   float64       // bytes per result record, from the records added by the drain
	first, mid  float64       // drain tasks/s of the windows
	last        float64       //
	drained     int64         // tasks the worker completed in the big drain
	afterDrain  weight        // right after the drain
	final       weight        // when the watch ended
	reclaimedIn time.Duration // when the queue's storage was first back to peak/4
	reclaimed   bool          // it was, within -reclaim
}

// poll is how often the drain's progress and the size after it are read.
const (
	progressPoll = time.Millisecond
	sizePoll     = 5 * time.Second
)

// run measures one backend and writes the report to w.
func run(ctx context.Context, cfg config, w io.Writer) error {
	_, err := measure(ctx, cfg, w)
	return err
}

func measure(ctx context.Context, cfg config, w io.Writer) (res result, err error) {
	if err := cfg.check(); err != nil {
		return res, err
	}
	eng, err := newEngine(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, eng.close(context.WithoutCancel(ctx))) }()
	q, err := jobq.OpenWithOptions(ctx, eng.url, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, q.Close()) }()
	printf(w, "depthbench %s: n=%d window=%d batch=%d handlers=%d; load average %s\n",
		cfg.backend, cfg.n, cfg.window, cfg.batch, cfg.handlers, loadAverage())

	if res.idle, err = eng.weigh(ctx); err != nil {
		return res, fmt.Errorf("size: %w", err)
	}

	// A warm-up, so that the yardstick does not pay for the first
	// connections and script loads: a tenth of a window, drained.
	warm := max(cfg.window/10, 1)
	if _, err := pushAll(ctx, q, -warm, 0, cfg.batch, warm); err != nil {
		return res, err
	}
	warmup := startWorker(ctx, q, cfg.handlers)
	_, err = warmup.waitDone(ctx, []int64{int64(warm)}, nil)
	if stopErr := warmup.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return res, err
	}

	// The yardstick: a small backlog pushed, then drained.
	if _, err := pushAll(ctx, q, 0, cfg.window, cfg.batch, cfg.window); err != nil {
		return res, err
	}
	ph := phaseStart(cfg.cpuProfile, "yardstick")
	small := startWorker(ctx, q, cfg.handlers)
	marks, err := small.waitDone(ctx, []int64{int64(cfg.window)}, nil)
	yardCost := ph.end(int64(cfg.window))
	if stopErr := small.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return res, err
	}
	res.yardstick = float64(cfg.window) / marks[0].Seconds()
	printf(w, "drain of a %d backlog: %.0f tasks/s; %s\n", cfg.window, res.yardstick, yardCost)

	// The backlog.
	tenth := max(cfg.n/10, cfg.batch)
	res.pushRates, err = pushAll(ctx, q, cfg.window, cfg.window+cfg.n, cfg.batch, tenth)
	if err != nil {
		return res, err
	}
	for i, r := range res.pushRates {
		printf(w, "push %d-%d: %.0f tasks/s\n", i*tenth, min((i+1)*tenth, cfg.n), r)
	}
	if res.peak, err = eng.weigh(ctx); err != nil {
		return res, fmt.Errorf("size: %w", err)
	}
	res.perTask = float64(res.peak.queue()-res.idle.queue()) / float64(cfg.n)
	printf(w, "size (%s)\n", eng.what)
	printf(w, "queue's storage: %s empty, %s with %d queued: %.0f bytes per queued task (result records beside it: %s)\n",
		mb(res.idle.queue()), mb(res.peak.queue()), cfg.n, res.perTask, mb(res.peak.records))
	if eng.detail != nil {
		printf(w, "  %s\n", eng.detail(ctx))
	}

	// The drain, timed at three windows; the worker then waits on the
	// empty queue while the size is watched.
	n, win := int64(cfg.n), int64(cfg.window)
	midStart := n/2 - win/2
	// Each window's cost per task, and its CPU profile with -cpuprofile-prefix.
	costs := make([]string, 3)
	ph = phaseStart(cfg.cpuProfile, "first")
	big := startWorker(ctx, q, cfg.handlers)
	defer func() { err = errors.Join(err, big.stop()) }()
	marks, err = big.waitDone(ctx, []int64{win, midStart, midStart + win, n - win, n}, func(i int) {
		switch i {
		case 0, 2, 4:
			costs[i/2] = ph.end(win)
		case 1:
			ph = phaseStart(cfg.cpuProfile, "middle")
		case 3:
			ph = phaseStart(cfg.cpuProfile, "last")
		}
	})
	if err != nil {
		return res, err
	}
	res.first = float64(win) / marks[0].Seconds()
	res.mid = float64(win) / (marks[2] - marks[1]).Seconds()
	res.last = float64(win) / (marks[4] - marks[3]).Seconds()
	res.drained = big.wk.Counts().Done
	printf(w, "drain at depth: first %d %.0f tasks/s (%.2fx the small backlog), middle %.0f (%.2fx), last %.0f (%.2fx); all %d in %s\n",
		win, res.first, res.first/res.yardstick, res.mid, res.mid/res.yardstick, res.last, res.last/res.yardstick,
		n, marks[4].Round(time.Millisecond))
	printf(w, "  first: %s\n  middle: %s\n  last: %s\n", costs[0], costs[1], costs[2])

	if res.afterDrain, err = eng.weigh(ctx); err != nil {
		return res, fmt.Errorf("size: %w", err)
	}
	if added := res.afterDrain.count - res.peak.count; added > 0 {
		res.perRecord = float64(res.afterDrain.records-res.peak.records) / float64(added)
	}
	printf(w, "size right after the drain: %s\n", res.afterDrain.report(res.peak))
	printf(w, "result records: %d kept, %.0f bytes per result record\n", res.afterDrain.count, res.perRecord)
	if eng.detail != nil {
		printf(w, "  %s\n", eng.detail(ctx))
	}
	// Watch until the queue's storage is back to a quarter of its peak and
	// has not moved for two polls, or -reclaim has passed. The records are
	// not the queue's: they stay for the retention.
	res.final = res.afterDrain
	start, stable := time.Now(), 0
	for time.Since(start) < cfg.reclaim && (!res.reclaimed || stable < 2) {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(min(sizePoll, cfg.reclaim)):
		}
		now, err := eng.weigh(ctx)
		if err != nil {
			return res, fmt.Errorf("size: %w", err)
		}
		if now.queue() == res.final.queue() {
			stable++
		} else {
			stable = 0
		}
		res.final = now
		if !res.reclaimed && now.queue() <= res.peak.queue()/4 {
			res.reclaimed, res.reclaimedIn = true, time.Since(start)
			printf(w, "size %s after the drain: queue's storage %s, back to at most a quarter of its peak\n", res.reclaimedIn.Round(time.Second), mb(now.queue()))
		}
	}
	if cfg.reclaim > 0 {
		printf(w, "size %s after the drain: %s\n", time.Since(start).Round(time.Second), res.final.report(res.peak))
		if eng.detail != nil {
			printf(w, "  %s\n", eng.detail(ctx))
		}
	}
	return res, nil
}

// report gives w's parts, the queue's storage also as a share of its size
// at peak.
func (w weight) report(peak weight) string {
	return fmt.Sprintf("queue's storage %s (%.0f%% of its peak), result records %s; %s in all",
		mb(w.queue()), pct(w.queue(), peak.queue()), mb(w.records), mb(w.total))
}

func pct(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// pushAll pushes tasks numbered from..to in PushBatch calls of batch and
// returns the push rate of each run of every tasks.
func pushAll(ctx context.Context, q *jobq.Queue, from, to, batch, every int) ([]float64, error) {
	var rates []float64
	start, since := time.Now(), from
	tasks := make([]*jobq.Task, 0, batch)
	for i := from; i < to; {
		tasks = tasks[:0]
		for ; i < to && len(tasks) < batch; i++ {
			// No ID: jobq's default, the MD5 of the content (32 hex digits).
			tasks = append(tasks, &jobq.Task{Payload: json.RawMessage(`{"n": ` + strconv.Itoa(i) + `}`)})
		}
		if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
			return nil, fmt.Errorf("push: %w", err)
		}
		if i-since >= every || i == to {
			rates = append(rates, float64(i-since)/time.Since(start).Seconds())
			start, since = time.Now(), i
		}
	}
	return rates, nil
}

// noop is the worker's handler: the benchmark measures the queue.
var noop = worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })

// running is a worker started by startWorker.
type running struct {
	wk     *worker.Worker
	exited chan struct{} // closed when Run returns
	err    error         // Run's error, once exited is closed
}

// startWorker runs a worker that waits on an empty queue.
func startWorker(ctx context.Context, q *jobq.Queue, handlers int) *running {
	r := &running{
		wk:     worker.New(q, noop, worker.Options{Concurrency: handlers, Wait: true, StatusInterval: -1, Logger: slog.New(slog.DiscardHandler)}),
		exited: make(chan struct{}),
	}
	go func() {
		defer close(r.exited)
		r.err = r.wk.Run(ctx)
	}()
	return r
}

// stop ends the worker and returns its error.
func (r *running) stop() error {
	r.wk.Stop()
	<-r.exited
	return r.err
}

// waitDone waits until the worker has completed each count in marks (in
// increasing order) and returns when each was reached, from the call.
// reached, when set, is called with each mark's index as it is reached.
func (r *running) waitDone(ctx context.Context, marks []int64, reached func(int)) ([]time.Duration, error) {
	start := time.Now()
	at := make([]time.Duration, 0, len(marks))
	for len(at) < len(marks) {
		c := r.wk.Counts()
		if c.Failed > 0 {
			return nil, fmt.Errorf("the worker failed %d tasks", c.Failed)
		}
		for len(at) < len(marks) && c.Done >= marks[len(at)] {
			at = append(at, time.Since(start))
			if reached != nil {
				reached(len(at) - 1)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.exited:
			return nil, fmt.Errorf("the worker stopped after %d of %d tasks: %w", c.Done, marks[len(marks)-1], r.err)
		case <-time.After(progressPoll):
		}
	}
	return at, nil
}
