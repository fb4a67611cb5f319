package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
)

// pushBatchSize is how many tasks one PushBatch carries (the portable layer
// splits it further where a backend's batch limit is lower); large enough to
// amortise round trips, small enough to keep memory flat on huge inputs.
const pushBatchSize = 1000

// pushInFlight is how many batches are pushed at once, so that reading and
// encoding overlap the backend's round trips.
const pushInFlight = 4

type pushFlags struct {
	commands   []string
	env        []string
	numRetries int
	priority   int
	delay      time.Duration
	gateCmd    string
	cwd        string
	printIDs   bool
	concKey    string
	rateKey    string
	waitRoom   bool
}

func (a *app) pushCommand() *cobra.Command {
	var f pushFlags
	cmd := &cobra.Command{
		Use:   "push [-c COMMAND]... [flags]",
		Short: "Queue tasks: one per -c, or one per line of standard input",
		Long: `Queue shell tasks. Each -c/--command is one task. Without -c, every line
of standard input is one task (blank lines are skipped): a line starting
with '{' is a JSON object of task kwargs, as in ai4s-jobq — {"cmd": "...",
"env": {...}, "cwd": "..."} — with -e variables merged into its env (they
win); any other line is a shell command. A malformed line stops the push
with an error naming its line number and saying how many tasks were pushed
before it.

Tasks are pushed in batches. When standard error is a terminal, a progress
line shows the count and rate.`,
		Example: `  jobq sqlite://./work.db push -c "echo hello" -c "echo world"
  jobq sqlite://./work.db push -c 'python train.py' -e SEED=1 -e LR=0.1 --num-retries 2
  seq 1000 | sed 's/^/echo /' | jobq sqlite://./work.db push
  echo '{"cmd": "echo $NAME", "env": {"NAME": "x"}}' | jobq sqlite://./work.db push
  jobq sqlite://./work.db push -c 'nvidia-smi && ./gpu-job' --gate-cmd 'nvidia-smi' --delay 10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.push(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.commands, "command", "c", nil, "a shell command to queue (repeatable; one task each)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "an environment variable for the tasks, K=V (repeatable, order kept)")
	countFlag(fl, &f.numRetries, "num-retries", "", 0, retriesRange, "how many times a failed task is retried before it is dead-lettered")
	countFlag(fl, &f.priority, "priority", "", 0, priorityRange, fmt.Sprintf("priority %d..%d, higher runs first (where the backend supports it)", jobq.MinPriority, jobq.MaxPriority))
	fl.Var(durationFlag(&f.delay), "delay", "make the tasks visible only after this long, e.g. 30s, 2h, 1d")
	fl.StringVar(&f.gateCmd, "gate-cmd", "", "a command a worker runs first; the tasks run only on workers where it succeeds")
	fl.StringVar(&f.cwd, "cwd", "", "the working directory of the tasks (default: the worker's)")
	fl.BoolVar(&f.printIDs, "print-ids", false, "print the ID of each pushed task on standard output")
	fl.StringVar(&f.concKey, "concurrency-key", "", "a key whose tasks run at most N at once, N set with 'jobq QUEUE policy set concurrency KEY=N'")
	fl.StringVar(&f.rateKey, "rate-limit-key", "", "a key whose tasks start at most COUNT per PERIOD, set with 'jobq QUEUE policy set rate KEY=COUNT/PERIOD'")
	fl.BoolVar(&f.waitRoom, "wait-for-room", false, "when the queue is at its max-depth, wait (with backoff) for room instead of failing")
	return cmd
}

// pusher accumulates tasks and pushes them in batches, several at a time,
// handling the results in input order.
type pusher struct {
	a       *app
	q       *jobq.Queue
	f       pushFlags
	batch   []*jobq.Task
	pending []*pushJob // oldest first
	pushed  int
	dups    int
	bar     *progressbar.ProgressBar
	printer *bufio.Writer
	// mu guards lastFull, when --wait-for-room last reported waiting.
	mu       sync.Mutex
	lastFull time.Time
}

// pushJob is one batch being pushed.
type pushJob struct {
	res  []jobq.PushResult
	err  error
	done chan struct{}
}

func (a *app) push(ctx context.Context, f pushFlags) error {
	env, err := parseEnvFlags(f.env)
	if err != nil {
		return err
	}
	if f.numRetries < 0 {
		return usageError("--num-retries is %d; it must be 0 or more", f.numRetries)
	}
	if f.priority < jobq.MinPriority || f.priority > jobq.MaxPriority {
		return usageError("--priority %d is out of range; use %d..%d", f.priority, jobq.MinPriority, jobq.MaxPriority)
	}
	q, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	p := &pusher{a: a, q: q, f: f, printer: bufio.NewWriter(a.stdout)}
	defer p.printer.Flush()

	if len(f.commands) > 0 {
		for _, c := range f.commands {
			if err := p.add(ctx, &jobq.Task{Command: c, Env: env}); err != nil {
				return err
			}
		}
		if err := p.flush(ctx); err != nil {
			return err
		}
		a.log.Info("pushed", "tasks", p.pushed, "duplicates", p.dups, "queue", q.URL())
		return nil
	}

	if file, ok := a.stdin.(*os.File); ok && isatty.IsTerminal(file.Fd()) {
		fmt.Fprintln(a.stderr, "jobq: reading tasks from standard input, one per line; end with Ctrl-D (use -c to push a single command)")
	}
	if file, ok := a.stderr.(*os.File); ok && isatty.IsTerminal(file.Fd()) {
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(a.stderr),
			progressbar.OptionSetDescription("pushing"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("tasks"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		defer p.bar.Finish()
	}
	r := bufio.NewReaderSize(a.stdin, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, rerr := r.ReadString('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return p.stopped(ctx, fmt.Errorf("reading standard input at line %d: %w", lineNo, rerr))
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) != "" {
			t, perr := parseTaskLine(line, env)
			if perr != nil {
				return p.stopped(ctx, asUsage(fmt.Errorf("line %d: %w", lineNo, perr)))
			}
			if err := p.add(ctx, t); err != nil {
				return err
			}
		}
		if rerr != nil {
			break
		}
	}
	if err := p.flush(ctx); err != nil {
		return err
	}
	if p.bar != nil {
		_ = p.bar.Finish()
	}
	a.log.Info("pushed", "tasks", p.pushed, "duplicates", p.dups, "queue", q.URL())
	return nil
}

// add applies the shared flags to t and queues it for the next batch.
func (p *pusher) add(ctx context.Context, t *jobq.Task) error {
	t.NumRetries = p.f.numRetries
	t.Priority = p.f.priority
	t.GateCmd = p.f.gateCmd
	t.ConcurrencyKey = p.f.concKey
	t.RateLimitKey = p.f.rateKey
	if t.Cwd == "" && t.IsShell() {
		t.Cwd = p.f.cwd
	}
	if p.f.delay > 0 {
		t.NotBefore = time.Now().Add(p.f.delay)
	}
	p.batch = append(p.batch, t)
	if len(p.batch) >= pushBatchSize {
		return p.send(ctx)
	}
	return nil
}

// send starts pushing the accumulated batch, first waiting for the oldest
// batch in flight when pushInFlight are.
func (p *pusher) send(ctx context.Context) error {
	if len(p.batch) == 0 {
		return nil
	}
	if len(p.pending) >= pushInFlight {
		if err := p.collect(); err != nil {
			return err
		}
	}
	job := &pushJob{done: make(chan struct{})}
	tasks := p.batch
	p.batch = make([]*jobq.Task, 0, pushBatchSize)
	go func() {
		defer close(job.done)
		job.res, job.err = p.q.PushWithOptions(ctx, tasks, jobq.PushOptions{WaitForRoom: p.f.waitRoom, OnFull: p.waiting})
	}()
	p.pending = append(p.pending, job)
	return nil
}

// collect waits for the oldest batch in flight and records its results.
func (p *pusher) collect() error {
	job := p.pending[0]
	p.pending = p.pending[1:]
	<-job.done
	for _, r := range job.res {
		if r.Duplicate {
			p.dups++
		}
		if p.f.printIDs {
			fmt.Fprintln(p.printer, r.ID)
		}
	}
	p.pushed += len(job.res)
	if p.bar != nil {
		_ = p.bar.Add(len(job.res))
	}
	if job.err != nil {
		// Let the other batches finish, so the count is right.
		for _, other := range p.pending {
			<-other.done
			p.pushed += len(other.res)
		}
		p.pending = nil
		code := ExitFailure
		if c := jobq.ErrorCode(job.err); c == jobq.InvalidArgument || c == jobq.TooLarge {
			code = ExitUsage
		}
		return &exitError{code: code, err: fmt.Errorf("%w (%d tasks were pushed in all)", job.err, p.pushed)}
	}
	return nil
}

// flush pushes what is accumulated and waits for every batch in flight.
func (p *pusher) flush(ctx context.Context) error {
	if err := p.send(ctx); err != nil {
		return err
	}
	for len(p.pending) > 0 {
		if err := p.collect(); err != nil {
			return err
		}
	}
	return nil
}

// stopped pushes the tasks read before a bad line, then reports the error
// with the count.
func (p *pusher) stopped(ctx context.Context, cause error) error {
	if err := p.flush(ctx); err != nil {
		return err
	}
	return &exitError{code: exitCode(cause), err: fmt.Errorf("%w; %d tasks were pushed before it, nothing after it", cause, p.pushed)}
}

// parseEnvFlags parses -e K=V flags, keeping their order.
func parseEnvFlags(flags []string) ([]jobq.EnvVar, error) {
	var env []jobq.EnvVar
	for _, kv := range flags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError("-e %q: expected KEY=VALUE", kv)
		}
		env = setEnv(env, k, v)
	}
	return env, nil
}

// setEnv sets k in env, replacing an existing entry in place (as a Python
// dict update does) or appending a new one.
func setEnv(env []jobq.EnvVar, k, v string) []jobq.EnvVar {
	for i := range env {
		if env[i].Name == k {
			env[i].Value = v
			return env
		}
	}
	return append(env, jobq.EnvVar{Name: k, Value: v})
}
