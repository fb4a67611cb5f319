// Command chaos drains a queue with jobq workers while killing them with
// SIGKILL (and, optionally, restarting the engine), then counts what ran:
// every task must have run at least once (nothing lost), and a kill may
// re-run only the few tasks that were running or had just finished.
//
//	go run ./internal/chaos -queue 'postgres://postgres@127.0.0.1/test?queue=chaos1'
//	go run ./internal/chaos -queue 'redis://127.0.0.1:6390/0?queue=chaos1' \
//	    -restart 'redis-cli -p 6390 shutdown; redis-server --port 6390 --daemonize yes --appendonly yes'
//
// Each task is a short shell command that appends a start line and, when
// it finishes, an end line (task number, the worker's pid, the time) to a
// file; the file is the ground truth. The workers inherit the environment
// (JOBQ_CONNECTION_STRING and the like). The queue must be empty when the
// run starts. The result is one JSON line; the exit status is 1 when a
// task was lost or left behind.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	queue      string
	jobq       string
	tasks      int
	kills      int
	workers    int
	handlers   int
	visibility time.Duration
	restart    string
	restarts   int
	timeout    time.Duration
	keep       bool
	analyse    string
}

// result is what a run found, printed as one JSON line at the end.
type result struct {
	Queue      string `json:"queue"`
	Tasks      int    `json:"tasks"`
	Kills      int    `json:"kills"`
	Restarts   int    `json:"engine_restarts"`
	Runs       int    `json:"runs"`
	Lost       int    `json:"lost"`
	LostTasks  []int  `json:"lost_tasks,omitempty"`
	Duplicates int    `json:"duplicates"`
	// PerKill counts the duplicates put down to kills, per kill.
	PerKill    float64 `json:"duplicates_per_kill"`
	MaxPerKill int     `json:"max_duplicates_per_kill"`
	// DupCauses splits the duplicates by what the run that was repeated
	// was doing when its worker died; see analyse.
	DupCauses map[string]int `json:"duplicates_by_cause"`
	// Redelivered splits the tasks delivered more than once the same way,
	// whether or not they then ran twice.
	Redelivered  map[string]int `json:"redelivered_by_cause"`
	KillLog      []killReport   `json:"kill_log,omitempty"`
	WorkerExits  int            `json:"worker_exits"`
	LeftQueued   int            `json:"left_queued"`
	DeadLettered int            `json:"dead_lettered"`
	Seconds      float64        `json:"seconds"`
	Date         string         `json:"date"`
}

func main() {
	var c config
	flag.StringVar(&c.queue, "queue", "", "queue URL (required; the queue must be empty)")
	flag.StringVar(&c.jobq, "jobq", "", "jobq binary (default: build ./cmd/jobq into a temporary directory)")
	flag.IntVar(&c.tasks, "tasks", 3000, "tasks to push")
	flag.IntVar(&c.kills, "kills", 10, "workers to SIGKILL, spread evenly over the drain (each one while it runs a task)")
	flag.IntVar(&c.workers, "workers", 3, "worker processes running at once")
	flag.IntVar(&c.handlers, "n", 2, "tasks each worker runs at once (worker -n)")
	flag.DurationVar(&c.visibility, "visibility-timeout", 10*time.Second, "worker --visibility-timeout: how soon a killed worker's tasks reappear")
	flag.StringVar(&c.restart, "restart", "", "shell command that restarts the engine (it must keep the engine's data)")
	flag.IntVar(&c.restarts, "restarts", 1, "how many times to run -restart, spread evenly over the drain")
	flag.DurationVar(&c.timeout, "timeout", 15*time.Minute, "give up after this long")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory (worker logs, the run file)")
	flag.StringVar(&c.analyse, "analyse", "", "read a work directory kept by -keep again instead of running (give -tasks too)")
	flag.Parse()
	if c.analyse != "" {
		r, err := reanalyse(c.analyse, c.tasks)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(1)
		}
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
		return
	}
	if c.queue == "" || c.tasks < 1 || c.workers < 1 || c.handlers < 1 || c.kills < 0 || c.restarts < 0 {
		fmt.Fprintln(os.Stderr, "chaos: -queue is required; -tasks, -workers and -n must be positive, -kills and -restarts not negative")
		os.Exit(2)
	}
	if c.restart == "" {
		c.restarts = 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := run(ctx, c)
	if r.Tasks > 0 {
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	if r.Lost > 0 || r.LeftQueued > 0 || r.DeadLettered > 0 {
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) (result, error) {
	dir, err := os.MkdirTemp("", "jobq-chaos-")
	if err != nil {
		return result{}, err
	}
	if c.keep {
		fmt.Fprintln(os.Stderr, "chaos: work directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if c.jobq == "" {
		c.jobq = filepath.Join(dir, "jobq")
		build := exec.CommandContext(ctx, "go", "build", "-o", c.jobq, "./cmd/jobq")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return result{}, fmt.Errorf("building jobq (run from the repository root, or pass -jobq): %w", err)
		}
	}
	h := &harness{c: c, dir: dir, runs: filepath.Join(dir, "runs")}
	if n, err := h.queued(ctx); err != nil {
		return result{}, err
	} else if n != 0 {
		return result{}, fmt.Errorf("the queue holds %d tasks; give an empty queue", n)
	}
	start := time.Now()
	if err := h.push(ctx); err != nil {
		return result{}, err
	}
	res, err := h.drain(ctx)
	res.Seconds = time.Since(start).Seconds()
	res.Date = start.UTC().Format(time.DateOnly)
	return res, err
}

type harness struct {
	c        config
	dir      string
	runs     string
	seq      int
	kills    []kill
	restarts []span
}

func (h *harness) jobq(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.c.jobq, append([]string{h.c.queue}, args...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// push queues the tasks through `jobq push` on standard input, one shell
// command a line. Each task records its start, sleeps a little (so that
// kills find tasks running), then records its end; a record is the task's
// number, the pid of the worker that runs it ($PPID of the task's bash)
// and the time.
func (h *harness) push(ctx context.Context) error {
	var in strings.Builder
	for i := range h.c.tasks {
		fmt.Fprintf(&in, `n=%d; echo "s $n $PPID $EPOCHREALTIME" >> %[3]s; sleep 0.0%[2]d; echo "e $n $PPID $EPOCHREALTIME" >> %[3]s`+"\n",
			i, 1+i%5, h.runs)
	}
	cmd := h.jobq(ctx, "push", "-q")
	cmd.Stdin = strings.NewReader(in.String())
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	return nil
}

// stats reads `jobq stats --json`.
func (h *harness) stats(ctx context.Context) (map[string]any, error) {
	cmd := h.jobq(ctx, "stats", "--sample", "0", "--json")
	var stderr strings.Builder
	cmd.Stderr = &stderr // the backend's one-time warnings, every call
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("stats: %w\n%s", err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	return m, nil
}

func (h *harness) queued(ctx context.Context) (int, error) {
	m, err := h.stats(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range []string{"ready", "in_flight", "delayed"} {
		if v, ok := m[k].(float64); ok {
			n += int(v)
		}
	}
	return n, nil
}

// proc is a running worker process; done closes when it has exited.
type proc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	killed bool
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stopAll sends SIGTERM to every worker and waits for them to exit.
func stopAll(ctx context.Context, ps []*proc) {
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
	}
}

// startWorker starts one worker process that keeps polling.
func (h *harness) startWorker(ctx context.Context) (*proc, error) {
	h.seq++
	log, err := os.Create(filepath.Join(h.dir, fmt.Sprintf("worker-%03d.log", h.seq)))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, h.c.jobq, h.c.queue, "worker", "--wait",
		"-n", strconv.Itoa(h.c.handlers), "--visibility-timeout", h.c.visibility.String(),
		"--max-consecutive-failures", "-1", "--status-interval", "0")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(p.done) }()
	return p, nil
}

// children counts a process's child processes (the bash of each task it
// runs), from /proc.
func children(pid int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err == nil {
			n += len(strings.Fields(string(b)))
		}
	}
	return n
}

// pickVictim chooses a worker to kill: one that runs a task now, or any
// once none has for a while (force).
func pickVictim(workers []*proc, force bool) int {
	var busy []int
	for i, w := range workers {
		if !w.exited() && children(w.cmd.Process.Pid) > 0 {
			busy = append(busy, i)
		}
	}
	if len(busy) > 0 {
		return busy[rand.IntN(len(busy))]
	}
	if force {
		return rand.IntN(len(workers))
	}
	return -1
}

// drain runs the workers, kills one at each kill point (a share of the
// tasks seen done), restarts the engine at its restart points, replaces
// workers that exit on their own, and stops the workers once every task
// has run and the queue is empty — or once the queue has stayed empty long
// after the last run with tasks missing, which is a loss.
func (h *harness) drain(ctx context.Context) (result, error) {
	res := result{Queue: redact(h.c.queue), Tasks: h.c.tasks}
	workers := make([]*proc, 0, h.c.workers)
	for range h.c.workers {
		w, err := h.startWorker(ctx)
		if err != nil {
			return res, err
		}
		workers = append(workers, w)
	}
	defer func() { stopAll(context.WithoutCancel(ctx), workers) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var doneSince, killDue, emptySince, lastCount time.Time
	lastSeen := 0
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			err = fmt.Errorf("gave up: %w", ctx.Err())
			break loop
		case <-tick.C:
		}
		rf, rerr := readRuns(h.runs)
		if rerr != nil {
			return res, rerr
		}
		seen := len(rf.ends)
		for i, w := range workers {
			if w.exited() && !w.killed {
				res.WorkerExits++
				fmt.Fprintf(os.Stderr, "chaos: worker %d exited on its own (see its log); starting another\n", w.cmd.Process.Pid)
				if workers[i], err = h.startWorker(ctx); err != nil {
					return res, err
				}
			}
		}
		if len(h.kills) < h.c.kills && seen >= (len(h.kills)+1)*h.c.tasks/(h.c.kills+1) {
			if killDue.IsZero() {
				killDue = time.Now()
			}
			if i := pickVictim(workers, time.Since(killDue) > 2*time.Second); i >= 0 {
				w := workers[i]
				k := kill{pid: w.cmd.Process.Pid, at: time.Now(), running: children(w.cmd.Process.Pid)}
				w.killed = true
				_ = w.cmd.Process.Kill()
				h.kills = append(h.kills, k)
				killDue = time.Time{}
				if workers[i], err = h.startWorker(ctx); err != nil {
					return res, err
				}
			}
		}
		if res.Restarts < h.c.restarts && seen >= (res.Restarts+1)*h.c.tasks/(h.c.restarts+1) {
			cmd := exec.CommandContext(ctx, "sh", "-c", h.c.restart)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				return res, fmt.Errorf("restarting the engine: %w", err)
			}
			res.Restarts++
			h.restarts = append(h.restarts, span{t0, time.Now()})
			fmt.Fprintf(os.Stderr, "chaos: engine restart %d took %v, at %d tasks done\n", res.Restarts, time.Since(t0).Round(time.Millisecond), seen)
		}
		if seen != lastSeen {
			lastSeen, emptySince = seen, time.Time{}
		}
		// Counting the queue starts a process: once every half second.
		if time.Since(lastCount) < 500*time.Millisecond {
			continue
		}
		lastCount = time.Now()
		if seen < h.c.tasks {
			// A task that never runs while the queue stays empty is lost;
			// waiting out two leases and more leaves no doubt.
			if n, err := h.queued(ctx); err == nil && n == 0 && len(h.kills) == h.c.kills && res.Restarts == h.c.restarts {
				if emptySince.IsZero() {
					emptySince = time.Now()
				}
				if time.Since(emptySince) > 2*h.c.visibility+10*time.Second {
					break loop
				}
			}
			continue
		}
		// Every task ran once; wait for the queue to empty (a killed
		// worker's claims reappear after the visibility timeout and run
		// again) and for a quiet second.
		if doneSince.IsZero() {
			doneSince = time.Now()
		}
		n, qerr := h.queued(ctx)
		if qerr != nil {
			continue // the engine may be restarting
		}
		if n == 0 && time.Since(doneSince) > time.Second {
			break loop
		}
	}
	stopAll(context.WithoutCancel(ctx), workers)
	rf, rerr := readRuns(h.runs)
	if rerr != nil {
		return res, rerr
	}
	started, lerr := readWorkerLogs(h.dir)
	if lerr != nil {
		return res, lerr
	}
	analyse(&res, h.c.tasks, rf, started, h.kills, h.restarts)
	if kerr := saveKills(h.dir, h.kills); kerr != nil {
		return res, kerr
	}
	if rerr := saveRestarts(h.dir, h.restarts); rerr != nil {
		return res, rerr
	}
	if err != nil {
		return res, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if res.LeftQueued, err = h.queued(sctx); err != nil {
		return res, err
	}
	m, err := h.stats(sctx)
	if err != nil {
		return res, err
	}
	if v, ok := m["dead_lettered"].(float64); ok {
		res.DeadLettered = int(v)
	}
	return res, nil
}

// redact drops a URL's password, for the printed result.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndex(rest, "@")
	slash := strings.Index(rest, "/")
	if at < 0 || (slash >= 0 && at > slash) {
		return s
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
