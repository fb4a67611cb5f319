// Command chaos drains a queue with jobq workers while killing them with
// SIGKILL (and, optionally, restarting the engine), then counts what ran:
// every task must have run at least once (nothing lost), and a kill may
// re-run only the few tasks that were running or had just finished.
//
//	go run ./tools/chaos -queue 'postgres://postgres@127.0.0.1/test?queue=chaos1'
//	go run ./tools/chaos -queue 'redis://127.0.0.1:6390/0?queue=chaos1' \
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
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobq/jobq/internal/redact"
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
	if n, err := h.queuedAtStart(ctx); err != nil {
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

// queuedAtStart is how many tasks the queue holds before the run. An
// SQLite file that does not exist yet holds none: jobq's read-only
// commands refuse to create it, and the push creates it.
func (h *harness) queuedAtStart(ctx context.Context) (int, error) {
	if p, ok := sqlitePath(h.c.queue); ok {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
	}
	return h.queued(ctx)
}

// sqlitePath is the file an sqlite queue URL names, read as the sqlite
// backend reads it; false for other schemes and in-memory databases.
func sqlitePath(queue string) (string, bool) {
	u, err := url.Parse(queue)
	if err != nil || u.Scheme != "sqlite" {
		return "", false
	}
	p := u.Opaque
	if p == "" {
		p = u.Host + u.Path
	}
	return p, p != "" && p != ":memory:" && !strings.HasPrefix(p, "file:")
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
	d := &drainer{h: h, res: result{Queue: redact.URL(h.c.queue), Tasks: h.c.tasks}}
	if err := d.startWorkers(ctx); err != nil {
		return d.res, err
	}
	defer func() { stopAll(context.WithoutCancel(ctx), d.workers) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var gaveUp error
	for {
		select {
		case <-ctx.Done():
			gaveUp = fmt.Errorf("gave up: %w", ctx.Err())
		case <-tick.C:
		}
		if gaveUp != nil {
			break
		}
		done, err := d.step(ctx)
		if err != nil {
			return d.res, err
		}
		if done {
			break
		}
	}
	return d.finish(ctx, gaveUp)
}

// drainer is the state of one drain.
type drainer struct {
	h       *harness
	res     result
	workers []*proc
	// killDue is when the pending kill point was reached (zero: none
	// pending).
	killDue time.Time
	// lastSeen is the count of tasks seen done, emptySince when the queue
	// was first seen empty since that count last changed.
	lastSeen   int
	emptySince time.Time
	// doneSince is when every task was first seen done.
	doneSince time.Time
	// lastCount is when the queue was last counted.
	lastCount time.Time
}

// startWorkers starts the configured number of workers.
func (d *drainer) startWorkers(ctx context.Context) error {
	d.workers = make([]*proc, 0, d.h.c.workers)
	for range d.h.c.workers {
		w, err := d.h.startWorker(ctx)
		if err != nil {
			return err
		}
		d.workers = append(d.workers, w)
	}
	return nil
}

// step is one tick of the drain: read the run file, keep the workers
// going, kill and restart when due, and report whether the drain is over.
func (d *drainer) step(ctx context.Context) (bool, error) {
	rf, err := readRuns(d.h.runs)
	if err != nil {
		return false, err
	}
	seen := len(rf.ends)
	if err := d.replaceExited(ctx); err != nil {
		return false, err
	}
	if err := d.maybeKill(ctx, seen); err != nil {
		return false, err
	}
	if err := d.maybeRestart(ctx, seen); err != nil {
		return false, err
	}
	return d.checkDone(ctx, seen), nil
}

// replaceExited starts a new worker in place of each that exited without
// being killed.
func (d *drainer) replaceExited(ctx context.Context) error {
	for i, w := range d.workers {
		if !w.exited() || w.killed {
			continue
		}
		d.res.WorkerExits++
		fmt.Fprintf(os.Stderr, "chaos: worker %d exited on its own (see its log); starting another\n", w.cmd.Process.Pid)
		var err error
		if d.workers[i], err = d.h.startWorker(ctx); err != nil {
			return err
		}
	}
	return nil
}

// maybeKill kills a worker once the next kill point is reached: one that
// runs a task, or any after two seconds without one.
func (d *drainer) maybeKill(ctx context.Context, seen int) error {
	c := d.h.c
	if len(d.h.kills) >= c.kills || seen < (len(d.h.kills)+1)*c.tasks/(c.kills+1) {
		return nil
	}
	if d.killDue.IsZero() {
		d.killDue = time.Now()
	}
	i := pickVictim(d.workers, time.Since(d.killDue) > 2*time.Second)
	if i < 0 {
		return nil
	}
	return d.killWorker(ctx, i)
}

// killWorker sends SIGKILL to worker i, records the kill and starts a
// worker in its place.
func (d *drainer) killWorker(ctx context.Context, i int) error {
	w := d.workers[i]
	k := kill{pid: w.cmd.Process.Pid, at: time.Now(), running: children(w.cmd.Process.Pid)}
	w.killed = true
	_ = w.cmd.Process.Kill()
	d.h.kills = append(d.h.kills, k)
	d.killDue = time.Time{}
	var err error
	d.workers[i], err = d.h.startWorker(ctx)
	return err
}

// maybeRestart restarts the engine once the next restart point is
// reached.
func (d *drainer) maybeRestart(ctx context.Context, seen int) error {
	c := d.h.c
	if d.res.Restarts >= c.restarts || seen < (d.res.Restarts+1)*c.tasks/(c.restarts+1) {
		return nil
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", c.restart)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("restarting the engine: %w", err)
	}
	d.res.Restarts++
	d.h.restarts = append(d.h.restarts, span{t0, time.Now()})
	fmt.Fprintf(os.Stderr, "chaos: engine restart %d took %v, at %d tasks done\n", d.res.Restarts, time.Since(t0).Round(time.Millisecond), seen)
	return nil
}

// checkDone reports whether the drain is over, counting the queue at most
// once every half second (counting starts a process).
func (d *drainer) checkDone(ctx context.Context, seen int) bool {
	if seen != d.lastSeen {
		d.lastSeen, d.emptySince = seen, time.Time{}
	}
	if time.Since(d.lastCount) < 500*time.Millisecond {
		return false
	}
	d.lastCount = time.Now()
	if seen < d.h.c.tasks {
		return d.givenUpOnMissing(ctx)
	}
	return d.settled(ctx)
}

// givenUpOnMissing reports whether the missing tasks are lost: every kill
// and restart is done and the queue has stayed empty, with no task
// ending, for two leases and more.
func (d *drainer) givenUpOnMissing(ctx context.Context) bool {
	c := d.h.c
	n, err := d.h.queued(ctx)
	if err != nil || n != 0 || len(d.h.kills) != c.kills || d.res.Restarts != c.restarts {
		return false
	}
	if d.emptySince.IsZero() {
		d.emptySince = time.Now()
	}
	return time.Since(d.emptySince) > 2*c.visibility+10*time.Second
}

// settled reports, once every task has run, whether the queue is empty
// (a killed worker's claims reappear after the visibility timeout and run
// again) after a quiet second.
func (d *drainer) settled(ctx context.Context) bool {
	if d.doneSince.IsZero() {
		d.doneSince = time.Now()
	}
	n, err := d.h.queued(ctx)
	if err != nil {
		return false // the engine may be restarting
	}
	return n == 0 && time.Since(d.doneSince) > time.Second
}

// finish stops the workers, analyses the run, saves the kills and
// restarts for -analyse and, unless the drain gave up, counts what the
// queue still holds.
func (d *drainer) finish(ctx context.Context, gaveUp error) (result, error) {
	h := d.h
	stopAll(context.WithoutCancel(ctx), d.workers)
	rf, err := readRuns(h.runs)
	if err != nil {
		return d.res, err
	}
	started, err := readWorkerLogs(h.dir)
	if err != nil {
		return d.res, err
	}
	analyse(&d.res, h.c.tasks, rf, started, h.kills, h.restarts)
	if err := saveKills(h.dir, h.kills); err != nil {
		return d.res, err
	}
	if err := saveRestarts(h.dir, h.restarts); err != nil {
		return d.res, err
	}
	if gaveUp != nil {
		return d.res, gaveUp
	}
	return d.res, d.countLeft(ctx)
}

// countLeft records the tasks left queued and dead-lettered.
func (d *drainer) countLeft(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var err error
	if d.res.LeftQueued, err = d.h.queued(sctx); err != nil {
		return err
	}
	m, err := d.h.stats(sctx)
	if err != nil {
		return err
	}
	if v, ok := m["dead_lettered"].(float64); ok {
		d.res.DeadLettered = int(v)
	}
	return nil
}
