package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/all" // the engines a fleet can run on
)

// Config is one fleet run.
type Config struct {
	// Jobq is the jobq binary the workers run.
	Jobq string
	// Queue is the queue URL the workers and the push use (through the
	// bouncer, for Postgres).
	Queue string
	// Workers is how many worker processes run, Handlers how many tasks
	// each runs at once (worker -n).
	Workers, Handlers int
	// Tasks is how many tasks are pushed.
	Tasks int
	// Idle is how long the idle fleet is watched before the push; zero
	// skips the idle measurement.
	Idle time.Duration
	// Rate, when positive, pushes the tasks one at a time at this many
	// per second, as a trickle that an idle fleet keeps up with, rather
	// than all at once.
	Rate float64
	// Engine measures the engine's connections and CPU; nil measures
	// nothing on the engine side.
	Engine Engine
	// Dir holds the task log and the workers' output.
	Dir string
}

// Engine is what the fleet reads off the engine.
type Engine interface {
	// Usage is the engine's connection count for this fleet and its
	// cumulative CPU time so far.
	Usage(ctx context.Context) (conns int, cpu time.Duration, err error)
}

// Report is what a fleet run measured.
type Report struct {
	Workers, Handlers, Tasks int
	// IdleConns and BusyConns are the engine's connections with the fleet
	// idle and at the end of the drain.
	IdleConns, BusyConns int
	// IdleEngineCPU is the engine's CPU use (cores) with the fleet idle,
	// BaseEngineCPU over as long before the fleet started (what other
	// clients cost it), IdleWorkerCPU the workers' own.
	IdleEngineCPU, BaseEngineCPU, IdleWorkerCPU float64
	// WorkerRSS is the workers' summed resident memory, idle.
	WorkerRSS int64
	// Drain is from the start of the push to the last task run.
	Drain time.Duration
	// Rate is Config.Rate; EngineCPUPerTask the engine's CPU from the
	// start of the push to the last task run, per task; LateCPUPerTask
	// the same over the tasks that ran after the first half had (the
	// steady state, past the first use of each server process).
	Rate                             float64
	EngineCPUPerTask, LateCPUPerTask time.Duration
	// Ran is how many task runs the log holds; Distinct how many tasks
	// ran at least once; Duplicates how many runs repeated one; Lost how
	// many pushed tasks never ran.
	Ran, Distinct, Duplicates, Lost int
	// Left is the queue's ready + in-flight + delayed + dead count after
	// the drain.
	Left int64
}

// DrainRate is the drain rate in tasks per second.
func (r Report) DrainRate() float64 { return float64(r.Distinct) / r.Drain.Seconds() }

// String is the report as the command prints it.
func (r Report) String() string {
	s := fmt.Sprintf("workers=%d handlers=%d tasks=%d\n", r.Workers, r.Handlers, r.Tasks)
	if r.WorkerRSS > 0 {
		s += fmt.Sprintf("idle: engine connections %d, engine CPU %.3f cores (%.3f before the fleet started), workers' CPU %.3f cores, workers' RSS %d MiB\n",
			r.IdleConns, r.IdleEngineCPU, r.BaseEngineCPU, r.IdleWorkerCPU, r.WorkerRSS>>20)
	}
	if r.Rate > 0 {
		s += fmt.Sprintf("pushed one at a time at %.0f tasks/s\n", r.Rate)
	}
	if r.EngineCPUPerTask > 0 {
		s += fmt.Sprintf("engine CPU per task from the push to the last run: %.0f µs\n", float64(r.EngineCPUPerTask.Nanoseconds())/1e3)
	}
	if r.LateCPUPerTask > 0 {
		s += fmt.Sprintf("engine CPU per task after the first half ran: %.0f µs\n", float64(r.LateCPUPerTask.Nanoseconds())/1e3)
	}
	return s + fmt.Sprintf("drain: %.1fs, %.0f tasks/s, engine connections at the end %d\n"+
		"runs %d, distinct %d, duplicates %d, lost %d, left in queue %d",
		r.Drain.Seconds(), r.DrainRate(), r.BusyConns, r.Ran, r.Distinct, r.Duplicates, r.Lost, r.Left)
}

// Run starts the fleet, watches it idle, pushes the tasks, waits for every
// one to run (or ctx to end), stops the fleet and counts what ran. Each task
// appends its number to a log file, so lost and repeated runs are counted.
func Run(ctx context.Context, cfg Config) (Report, error) {
	rep := Report{Workers: cfg.Workers, Handlers: cfg.Handlers, Tasks: cfg.Tasks, Rate: cfg.Rate}
	if cfg.Workers < 1 || cfg.Handlers < 1 || cfg.Tasks < 1 {
		return rep, errors.New("fleet: workers, handlers and tasks must be at least 1")
	}
	logPath := filepath.Join(cfg.Dir, "runs.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		return rep, fmt.Errorf("fleet: %w", err)
	}

	if cfg.Idle > 0 && cfg.Engine != nil {
		_, cpu0, err := cfg.Engine.Usage(ctx)
		if err != nil {
			return rep, err
		}
		if err := sleep(ctx, cfg.Idle); err != nil {
			return rep, err
		}
		_, cpu1, err := cfg.Engine.Usage(ctx)
		if err != nil {
			return rep, err
		}
		rep.BaseEngineCPU = (cpu1 - cpu0).Seconds() / cfg.Idle.Seconds()
	}
	workers, err := startWorkers(cfg)
	defer stopWorkers(workers)
	if err != nil {
		return rep, err
	}
	// Let every worker open the queue and settle into its idle loop.
	if err := sleep(ctx, 3*time.Second+time.Duration(cfg.Workers)*20*time.Millisecond); err != nil {
		return rep, err
	}
	if cfg.Idle > 0 {
		if err := measureIdle(ctx, cfg, workers, &rep); err != nil {
			return rep, err
		}
	}

	var cpu0 time.Duration
	if cfg.Engine != nil {
		if _, cpu0, err = cfg.Engine.Usage(ctx); err != nil {
			return rep, err
		}
	}
	start := time.Now()
	halfCtx, stopHalf := context.WithCancel(ctx)
	defer stopHalf()
	half := readAtHalf(halfCtx, cfg, logPath)
	if cfg.Rate > 0 {
		err = trickle(ctx, cfg, logPath)
	} else {
		err = push(ctx, cfg, logPath)
	}
	if err != nil {
		return rep, err
	}
	for {
		n, err := countLines(logPath)
		if err != nil {
			return rep, err
		}
		if n >= cfg.Tasks {
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return rep, fmt.Errorf("fleet: %d of %d tasks ran before giving up: %w", n, cfg.Tasks, err)
		}
	}
	rep.Drain = time.Since(start)
	if cfg.Engine != nil {
		var cpu1 time.Duration
		if rep.BusyConns, cpu1, err = cfg.Engine.Usage(ctx); err != nil {
			return rep, err
		}
		rep.EngineCPUPerTask = (cpu1 - cpu0) / time.Duration(cfg.Tasks)
		stopHalf()
		if h, ok := <-half; ok && h.ran < cfg.Tasks {
			rep.LateCPUPerTask = (cpu1 - h.cpu) / time.Duration(cfg.Tasks-h.ran)
		}
	}
	// A run repeated late (a lease expiring) would land after the count.
	if err := sleep(ctx, time.Second); err != nil {
		return rep, err
	}
	stopWorkers(workers)
	if err := count(logPath, &rep); err != nil {
		return rep, err
	}
	q, err := jobq.Open(ctx, cfg.Queue)
	if err != nil {
		return rep, fmt.Errorf("fleet: open for stats: %w", err)
	}
	defer q.Close()
	st, err := q.Admin().Stats(ctx)
	if err != nil {
		return rep, fmt.Errorf("fleet: stats: %w", err)
	}
	rep.Left = st.Ready + st.InFlight + st.Delayed + st.Dead
	return rep, nil
}

// startWorkers starts cfg.Workers `jobq worker --wait` processes.
func startWorkers(cfg Config) ([]*exec.Cmd, error) {
	var cmds []*exec.Cmd
	for i := range cfg.Workers {
		out, err := os.Create(filepath.Join(cfg.Dir, fmt.Sprintf("worker%03d.log", i)))
		if err != nil {
			return cmds, fmt.Errorf("fleet: %w", err)
		}
		c := exec.Command(cfg.Jobq, cfg.Queue, "worker", "--wait", "-n", strconv.Itoa(cfg.Handlers),
			"--max-consecutive-failures", "-1", "--registry-interval", "0", "--preemption", "off", "-q")
		c.Stdout, c.Stderr = out, out
		err = c.Start()
		out.Close()
		if err != nil {
			return cmds, fmt.Errorf("fleet: start worker %d: %w", i, err)
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// stopWorkers sends SIGTERM to every worker still running and waits for it.
func stopWorkers(cmds []*exec.Cmd) {
	for _, c := range cmds {
		if c.ProcessState == nil {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, c := range cmds {
		if c.ProcessState == nil {
			_ = c.Wait()
		}
	}
}

// measureIdle records the idle fleet's connections, CPU and memory over
// cfg.Idle.
func measureIdle(ctx context.Context, cfg Config, workers []*exec.Cmd, rep *Report) error {
	var cpu0 time.Duration
	var err error
	if cfg.Engine != nil {
		if _, cpu0, err = cfg.Engine.Usage(ctx); err != nil {
			return err
		}
	}
	w0, _ := procUsage(workers)
	if err := sleep(ctx, cfg.Idle); err != nil {
		return err
	}
	w1, rss := procUsage(workers)
	rep.IdleWorkerCPU = (w1 - w0).Seconds() / cfg.Idle.Seconds()
	rep.WorkerRSS = rss
	if cfg.Engine != nil {
		conns, cpu1, err := cfg.Engine.Usage(ctx)
		if err != nil {
			return err
		}
		rep.IdleConns = conns
		rep.IdleEngineCPU = (cpu1 - cpu0).Seconds() / cfg.Idle.Seconds()
	}
	return nil
}

// taskCommand is task i's shell command: it appends "i" to logPath, which
// count reads.
func taskCommand(i int, logPath string) string { return fmt.Sprintf("echo %d >> %s", i, logPath) }

// push pushes cfg.Tasks tasks, task i appending "i" to logPath.
func push(ctx context.Context, cfg Config, logPath string) error {
	var in strings.Builder
	for i := range cfg.Tasks {
		in.WriteString(taskCommand(i, logPath) + "\n")
	}
	c := exec.CommandContext(ctx, cfg.Jobq, cfg.Queue, "push")
	c.Stdin = strings.NewReader(in.String())
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("fleet: push: %w: %s", err, out)
	}
	return nil
}

// trickle pushes the same tasks as push, one per call, cfg.Rate a second.
func trickle(ctx context.Context, cfg Config, logPath string) error {
	q, err := jobq.Open(ctx, cfg.Queue)
	if err != nil {
		return fmt.Errorf("fleet: open for the push: %w", err)
	}
	defer q.Close()
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer tick.Stop()
	for i := range cfg.Tasks {
		kwargs, err := json.Marshal(map[string]string{"cmd": taskCommand(i, logPath)})
		if err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		if _, err := q.Push(ctx, &jobq.Task{Payload: kwargs}); err != nil {
			return fmt.Errorf("fleet: push task %d: %w", i, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// halfway is the engine's CPU read once half the tasks had run.
type halfway struct {
	ran int // tasks run at the read
	cpu time.Duration
}

// readAtHalf reads the engine's CPU once half of cfg.Tasks have run, and
// sends it; the channel closes without a value when ctx ends first, the
// read fails or there is no engine to read.
func readAtHalf(ctx context.Context, cfg Config, logPath string) <-chan halfway {
	out := make(chan halfway, 1)
	go func() {
		defer close(out)
		if cfg.Engine == nil {
			return
		}
		for ctx.Err() == nil {
			if n, err := countLines(logPath); err == nil && n >= cfg.Tasks/2 && n > 0 {
				_, cpu, err := cfg.Engine.Usage(ctx)
				after, err2 := countLines(logPath)
				if err == nil && err2 == nil {
					// Tasks that ended during the read: half on each side.
					out <- halfway{ran: (n + after) / 2, cpu: cpu}
				}
				return
			}
			_ = sleep(ctx, 50*time.Millisecond)
		}
	}()
	return out
}

// countLines is how many lines the file at path holds.
func countLines(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("fleet: %w", err)
	}
	return strings.Count(string(b), "\n"), nil
}

// count fills rep's run counts from the task log.
func count(path string, rep *Report) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	defer f.Close()
	seen := make([]int, rep.Tasks)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		i, err := strconv.Atoi(sc.Text())
		if err != nil || i < 0 || i >= rep.Tasks {
			return fmt.Errorf("fleet: the task log has a line %q that no task writes", sc.Text())
		}
		rep.Ran++
		if seen[i]++; seen[i] > 1 {
			rep.Duplicates++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	for _, n := range seen {
		if n > 0 {
			rep.Distinct++
		} else {
			rep.Lost++
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
