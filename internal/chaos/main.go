// Command chaos drains a queue with jobq workers while killing them with
// SIGKILL (and, optionally, restarting the engine), then counts what ran:
// every task must have run at least once (nothing lost), and a kill may
// re-run only the few tasks that were running or had just finished.
//
//	go run ./internal/chaos -queue 'postgres://postgres@127.0.0.1/test?queue=chaos1'
//	go run ./internal/chaos -queue 'redis://127.0.0.1:6379/0?queue=chaos1' \
//	    -restart 'redis-cli shutdown nosave; redis-server --daemonize yes --save "" --appendonly no'
//
// Each task appends its number to a file when it finishes; the file is the
// ground truth. The queue must be empty when the run starts.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	timeout    time.Duration
	keep       bool
}

// result is what a run found, printed as one JSON line at the end.
type result struct {
	Queue        string  `json:"queue"`
	Tasks        int     `json:"tasks"`
	Kills        int     `json:"kills"`
	Restarts     int     `json:"engine_restarts"`
	Runs         int     `json:"runs"`
	Lost         int     `json:"lost"`
	Duplicates   int     `json:"duplicates"`
	PerKill      float64 `json:"duplicates_per_kill"`
	LeftQueued   int     `json:"left_queued"`
	DeadLettered int     `json:"dead_lettered"`
	Seconds      float64 `json:"seconds"`
}

func main() {
	var c config
	flag.StringVar(&c.queue, "queue", "", "queue URL (required; the queue must be empty)")
	flag.StringVar(&c.jobq, "jobq", "", "jobq binary (default: build ./cmd/jobq into a temporary directory)")
	flag.IntVar(&c.tasks, "tasks", 3000, "tasks to push")
	flag.IntVar(&c.kills, "kills", 10, "workers to SIGKILL, spread evenly over the drain")
	flag.IntVar(&c.workers, "workers", 3, "worker processes running at once")
	flag.IntVar(&c.handlers, "n", 2, "tasks each worker runs at once (worker -n)")
	flag.DurationVar(&c.visibility, "visibility-timeout", 10*time.Second, "worker --visibility-timeout: how soon a killed worker's tasks reappear")
	flag.StringVar(&c.restart, "restart", "", "shell command that restarts the engine, run once halfway through the drain")
	flag.DurationVar(&c.timeout, "timeout", 15*time.Minute, "give up after this long")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory (worker logs, the run file)")
	flag.Parse()
	if c.queue == "" || c.tasks < 1 || c.workers < 1 || c.handlers < 1 || c.kills < 0 {
		fmt.Fprintln(os.Stderr, "chaos: -queue is required; -tasks, -workers and -n must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
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
	if err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

type harness struct {
	c    config
	dir  string
	runs string
	seq  int
}

func (h *harness) jobq(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, h.c.jobq, append([]string{h.c.queue}, args...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// push queues the tasks through `jobq push` on standard input, one shell
// command a line. Each task sleeps a little, so that kills find tasks
// running, then records its number.
func (h *harness) push(ctx context.Context) error {
	var in bytes.Buffer
	for i := range h.c.tasks {
		fmt.Fprintf(&in, "sleep 0.0%d; echo %d >> %s\n", 1+i%5, i, h.runs)
	}
	cmd := h.jobq(ctx, "push", "-q")
	cmd.Stdin = &in
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	return nil
}

// stats reads `jobq stats --json`.
func (h *harness) stats(ctx context.Context) (map[string]any, error) {
	cmd := h.jobq(ctx, "stats", "--sample", "0", "--json")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
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
	cmd  *exec.Cmd
	done chan struct{}
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

// count reads the run file: how many runs, and how many distinct tasks.
func (h *harness) count() (runs int, seen map[int]int, err error) {
	seen = make(map[int]int)
	f, err := os.Open(h.runs)
	if errors.Is(err, os.ErrNotExist) {
		return 0, seen, nil
	}
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil {
			continue // a line cut by a kill mid-write
		}
		runs++
		seen[n]++
	}
	return runs, seen, sc.Err()
}

// drain runs the workers, kills one at each kill point (a share of the
// tasks seen done), restarts the engine halfway when asked, and stops the
// workers once every task has run and the queue is empty.
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
	restarted := h.c.restart == ""
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var doneSince time.Time
	for {
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("gave up: %w", ctx.Err())
		case <-tick.C:
		}
		_, seen, err := h.count()
		if err != nil {
			return res, err
		}
		if res.Kills < h.c.kills && len(seen) >= (res.Kills+1)*h.c.tasks/(h.c.kills+1) {
			i := rand.IntN(len(workers))
			_ = workers[i].cmd.Process.Kill()
			res.Kills++
			w, err := h.startWorker(ctx)
			if err != nil {
				return res, err
			}
			workers[i] = w
		}
		if !restarted && len(seen) >= h.c.tasks/2 {
			restarted = true
			cmd := exec.CommandContext(ctx, "sh", "-c", h.c.restart)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return res, fmt.Errorf("restarting the engine: %w", err)
			}
			res.Restarts++
		}
		if len(seen) < h.c.tasks {
			continue
		}
		// Every task ran once; wait for the queue to empty (a killed
		// worker's claims reappear after the visibility timeout and run
		// again) and for a quiet second.
		if doneSince.IsZero() {
			doneSince = time.Now()
		}
		n, err := h.queued(ctx)
		if err != nil {
			continue // the engine may be restarting
		}
		if n == 0 && time.Since(doneSince) > time.Second {
			break
		}
	}
	stopAll(ctx, workers)
	runs, seen, err := h.count()
	if err != nil {
		return res, err
	}
	res.Runs = runs
	res.Lost = h.c.tasks - len(seen)
	res.Duplicates = runs - len(seen)
	if res.Kills > 0 {
		res.PerKill = float64(res.Duplicates) / float64(res.Kills)
	}
	if res.LeftQueued, err = h.queued(ctx); err != nil {
		return res, err
	}
	m, err := h.stats(ctx)
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
