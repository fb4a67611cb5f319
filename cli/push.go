package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bound"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/queueurl"
	"github.com/jobq/jobq/internal/recmarks"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/internal/shellword"
)

// pushBatchSize is how many tasks one PushBatch carries (the portable layer
// splits it further where a backend's batch limit is lower); large enough to
// amortise round trips, small enough to keep memory flat on huge inputs.
const pushBatchSize = 1000

// pushInFlight is how many batches are pushed at once, so that reading and
// encoding overlap the backend's round trips, unless the backend declares
// its own number (driver.Capabilities.PushConcurrency: 1 for SQLite, whose
// single writer makes batches in flight queue for its lock).
const pushInFlight = 4

// batchesInFlight is how many batches push keeps in flight on q: the
// --num-workers value when given (non-zero), else the backend's hint, else
// pushInFlight.
func batchesInFlight(q *jobq.Queue, flag int) int {
	if flag > 0 {
		return flag
	}
	if n := q.Capabilities().PushConcurrency; n > 0 {
		return n
	}
	return pushInFlight
}

type pushFlags struct {
	// flagsHint is the flags as typed, for the hint that resumes a push.
	flagsHint   string
	commands    []string
	env         []string
	numRetries  int
	priority    int
	delay       time.Duration
	gateCmd     string
	cwd         string
	printIDs    bool
	concKey     string
	rateKey     string
	waitRoom    bool
	dirsync     string
	dedupWindow time.Duration
	numWorkers  int
	wait        bool
	waitTimeout time.Duration
	asJSON      bool
	backoff     jobq.Backoff
	timeLimit   time.Duration
	uniqueFor   time.Duration
	group       string
	skipSucc    bool
	after       []string
	afterGroups []string
	then        string
	thenIf      string

	// groupSet and thenSet: --group and --then were given (an empty value
	// is refused, not taken as absent).
	groupSet, thenSet bool
}

func (a *app) pushCommand() *cobra.Command {
	var f pushFlags
	cmd := &cobra.Command{
		Use:   "push [-c COMMAND]... [flags]",
		Short: "Queue tasks: one per -c, or one per line of standard input",
		Long: `Queue shell tasks. Each -c/--command is one task. Without -c, every line
of standard input is one task, exactly as read — its newline included, so a
blank line is a task too — which is what ai4s-jobq pushes, byte for byte.
A line (or -c value) starting with '{' is a JSON object of task kwargs, as
in ai4s-jobq — {"cmd": "...", "env": {...}, "cwd": "..."} — kept in its key
order, with -e variables merged into its env (they win); any other line is
a shell command. A malformed line stops the push: the lines before it are
stored, and the error names the line and how to resume.

Tasks are pushed in batches. When standard error is a terminal, a progress
line shows the count and rate. Ctrl-C stops reading, lets the batches in
flight finish (under --wait-for-room, one waiting for room stops waiting
and is not stored), and says which lines were stored and how to resume; a
second Ctrl-C abandons the batches in flight.

--wait then waits for every pushed task to end and prints one line per task
as it ends — ID STATE [exit=N] [value=JSON] [error="..."], value being a Go
handler's return value — or, with --json, one JSON object per line (the
schema of 'result --json'), with a live line of counts, rate and ETA when
standard error is a terminal. It exits 0 when every task succeeded, else 1
with a summary of the failures and the input lines that pushed them.
Ctrl-C while waiting stops the waiting, not the tasks, and says how to
resume with 'jobq QUEUE wait'. A task ID is the hash of its content, so a
task pushed again while the record of an earlier identical task is kept
(the queue's retention) has that record: --wait reads the records before
pushing and waits for a record other than it, whatever the workers' clocks.

--unique-for D refuses as a duplicate a task that ended within D (its
result record says so) or is queued now: a task pushed at most once per D.

Dependencies: --after ID[,ID...] (or "after" in a JSON line) holds the
tasks until every task named has succeeded, --after-group G until every
task of group G has; if one is dead-lettered or cancelled they are
cancelled, their record naming it. An unknown ID, a parent that failed
already and a cycle are refused. --then CMD runs CMD once when every task
of the push's group has ended, with the counts in $JOBQ_GROUP_* (see
'group --help'); --then-if always runs it even if some failed. Workers
release held tasks within 2 s of their parents' end.

Retries: a failed task is retried after a delay that doubles with every
failure, with jitter (--retry-backoff, else the queue's retry-backoff
policy, else 10s up to 10m). --time-limit stops an attempt that runs longer
(SIGTERM, then SIGKILL) and counts it as a failure.`,
		Example: `  jobq sqlite://./work.db push -c "echo hello" -c "echo world"
  jobq sqlite://./work.db push -c 'python train.py' -e SEED=1 -e LR=0.1 --num-retries 2
  seq 1000 | sed 's/^/echo /' | jobq sqlite://./work.db push
  echo '{"cmd": "echo $NAME", "env": {"NAME": "x"}}' | jobq sqlite://./work.db push
  jobq sqlite://./work.db push -c 'nvidia-smi && ./gpu-job' --gate-cmd 'nvidia-smi' --delay 10m
  seq 1 50 | sed 's/^/.\/simulate /' | jobq sqlite://./work.db push --wait --num-retries 2 --retry-backoff 30s,10m
  jobq sqlite://./work.db push --print-ids --json -c 'make report' --time-limit 2h
  jobq sqlite://./work.db push --group sweep-1 --then 'python aggregate.py' --then-if always < sweep.txt
  jobq sqlite://./work.db push --after "$(jobq sqlite://./work.db push --print-ids -c './simulate.sh')" -c './plot.sh'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.flagsHint = flagsHint(cmd.Flags())
			f.groupSet, f.thenSet = cmd.Flags().Changed("group"), cmd.Flags().Changed("then")
			return a.push(cmd.Context(), f)
		},
	}
	addPushFlags(cmd.Flags(), &f)
	return cmd
}

// addPushFlags declares push's flags on fl, storing them in f.
func addPushFlags(fl *pflag.FlagSet, f *pushFlags) {
	fl.StringArrayVarP(&f.commands, "command", "c", nil, "a shell command to queue (repeatable; one task each)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "an environment variable for the tasks, K=V (repeatable, order kept)")
	countFlag(fl, &f.numRetries, "num-retries", "", 0, retriesRange, "how many times a failed task is retried before it is dead-lettered")
	countFlag(fl, &f.priority, "priority", "", 0, priorityRange, fmt.Sprintf("priority %d..%d, higher runs first (where the backend supports it)", driver.MinPriority, driver.MaxPriority))
	fl.Var(durationFlag(&f.delay), "delay", "make the tasks visible only after this long, e.g. 30s, 2h, 1d")
	fl.StringVar(&f.gateCmd, "gate-cmd", "", "a command a worker runs first; the tasks run only on workers where it succeeds")
	fl.StringVar(&f.cwd, "cwd", "", "the working directory of the tasks (default: the worker's)")
	fl.BoolVar(&f.printIDs, "print-ids", false, "print the ID of each pushed task on standard output")
	fl.StringVar(&f.concKey, "concurrency-key", "", "a key whose tasks run at most N at once, N set with 'jobq QUEUE policy set concurrency KEY=N'")
	fl.StringVar(&f.rateKey, "rate-limit-key", "", "a key whose tasks start at most COUNT per PERIOD, set with 'jobq QUEUE policy set rate KEY=COUNT/PERIOD'")
	fl.BoolVar(&f.waitRoom, "wait-for-room", false, "when the queue is at its max-depth, wait (with backoff) for room instead of failing; more lines than max-depth go in parts that fit")
	fl.StringVar(&f.dirsync, "bg-dirsync-to", "", "a directory the worker copies each task's $AMLT_DIRSYNC_DIR into, in the background and when the task ends (as ai4s-jobq)")
	fl.Var(durationFlag(&f.dedupWindow), "dedup-window", "Service Bus only: the duplicate-detection window of the queue when push creates it (as ai4s-jobq; same as ?dedup_window= in the URL)")
	countFlag(fl, &f.numWorkers, "num-workers", "", 0, bound.Ints{Min: 1, Max: 64}, fmt.Sprintf("how many batches are pushed at once (ai4s-jobq's enqueue workers; default: 1 on sqlite, %d elsewhere)", pushInFlight))
	fl.BoolVar(&f.wait, "wait", false, "wait for every pushed task to end, printing each outcome as it arrives; exit 0 only when all succeeded, else 1 with a summary (Ctrl-C stops the waiting, not the tasks)")
	fl.Var(durationFlag(&f.waitTimeout), "wait-timeout", "with --wait: stop waiting after this long (exit 1; the tasks keep running); 0: no limit")
	fl.BoolVar(&f.asJSON, "json", false, `with --print-ids: print {"id", "line", "duplicate", "position"} per task; with --wait: print each outcome as a JSON object (one per line)`)
	fl.Var(backoffValue{&f.backoff}, "retry-backoff", "retry a failed task after about BASE, doubling per failure up to CAP, with jitter, e.g. 10s,1h (BASE alone keeps the cap 10m; default: the queue's retry-backoff policy, else 10s,10m)")
	durationRangeFlag(fl, &f.uniqueFor, "unique-for", 0, uniqueForRange, "refuse as a duplicate a task that ended within this long (its result record says so) or is queued now, e.g. 24h (needs result records; 0: only the backend's dedup)")
	fl.StringVar(&f.group, "group", "", "tag the tasks with this group, to follow them with 'jobq QUEUE group NAME' (default: a new name, printed, where the backend counts groups)")
	fl.StringArrayVar(&f.after, "after", nil, "run the tasks only after these tasks (IDs, comma-separated; repeatable) have succeeded; if one is dead-lettered or cancelled, they are cancelled")
	fl.StringArrayVar(&f.afterGroups, "after-group", nil, "run the tasks only after every task of this group has succeeded (repeatable)")
	fl.StringVar(&f.then, "then", "", "a command to run once every task of the push's group has ended (the group's step; its environment has the group's counts)")
	fl.StringVar(&f.thenIf, "then-if", "all-succeeded", "when --then runs: all-succeeded (else it is cancelled) or always")
	fl.BoolVar(&f.skipSucc, "skip-succeeded", false, "leave out every task whose ID has a succeeded result record (within the queue's retention), and print how many were skipped: a rerun pushes only what did not succeed")
	durationRangeFlag(fl, &f.timeLimit, "time-limit", 0, taskTimeLimitRange, "stop an attempt that runs longer than this (SIGTERM, then SIGKILL) and count it as a failure; overrides the worker's --task-time-limit (0: the worker's)")
}

// pusher accumulates tasks and pushes them in batches, several at a time,
// handling the results in input order. It keeps which input lines were
// stored, so that an interrupted or failed push can say where to resume.
type pusher struct {
	a        *app
	q        *jobq.Queue
	f        pushFlags
	batch    []*jobq.Task
	lines    []int      // input line (or -c position) of each task in batch
	pending  []*pushJob // oldest first
	inFlight int
	pushed   int
	dups     int
	// skipped counts the tasks --skip-succeeded left out (skippedIDs:
	// theirs, with --wait); group is the tasks' group ("" for none).
	skipped    int
	skippedIDs map[string]bool
	// since is when the push began, less clockSlack: the dead letters
	// --wait reads count from it (marks decide for records), and so does
	// the wait its resume hint gives.
	since time.Time
	// marks are, with --wait, the records the pushed tasks' IDs had before
	// their batch was pushed: the wait counts an end when the record
	// differs, so that a worker whose clock is behind this machine's is
	// not taken for an earlier run.
	marks recmarks.Set
	// waitSigs are the signals that interrupt --wait's wait (waiter.sigs).
	waitSigs chan os.Signal
	group    string
	// noGroup is set once the made-up group could not be recorded (the
	// credentials cannot write the result container): the push goes on
	// without a group, as before groups existed.
	noGroup     atomic.Bool
	noGroupOnce sync.Once
	// resent counts the stored tasks that were sent again after an
	// attempt whose answer was lost: each may be queued twice.
	resent int
	// stored is the input lines known to be stored, as sorted closed
	// ranges; unknown the lines whose push went unanswered, which may be
	// stored, and unknownIDs their task IDs; firstLost is the first line
	// known not to be stored (0 when none).
	stored     []lineSpan
	unknown    []lineSpan
	unknownIDs []string
	firstLost  int
	bar        *progressbar.ProgressBar
	barStart   time.Time
	printer    *bufio.Writer
	// stopWaiting is closed on the first interrupt: --wait-for-room stops
	// waiting then (jobq.PushOptions.StopWaiting).
	stopWaiting <-chan struct{}
	// mu guards lastFull, when --wait-for-room last reported waiting.
	mu       sync.Mutex
	lastFull time.Time
	// ids are the distinct IDs pushed, in input order, and idLines the
	// input lines of each (kept for --wait).
	ids     []string
	idLines map[string][]int
}

// lineSpan is lines from..to of the input, both included.
type lineSpan struct{ from, to int }

// pushJob is one batch being pushed.
type pushJob struct {
	lines []int
	tasks []*jobq.Task
	res   []jobq.PushResult
	err   error
	done  chan struct{}
}

func (a *app) push(ctx context.Context, f pushFlags) error {
	opts, err := a.checkPushFlags(f)
	if err != nil {
		return err
	}
	q, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer q.Close()
	if f.uniqueFor > 0 {
		if err := a.checkUniqueFor(ctx, q); err != nil {
			return err
		}
	}
	group, err := a.pushGroup(q, f.group)
	if err != nil {
		return err
	}
	require, err := checkDepFlags(q, f, group)
	if err != nil {
		return err
	}
	// Refused before anything is pushed.
	if err := needRecords(ctx, q, f); err != nil {
		return err
	}
	if err := a.checkNoStep(ctx, q, f, group); err != nil {
		return err
	}
	p := &pusher{a: a, q: q, f: f, group: group, printer: bufio.NewWriter(a.stdout), inFlight: batchesInFlight(q, f.numWorkers), idLines: map[string][]int{}}
	if f.wait {
		p.since = time.Now().Add(-clockSlack)
		p.marks = recmarks.Set{}
		// The wait's signals, from the push's on: the push's watch
		// (watchInterrupts) ends before the wait begins, and a Ctrl-C
		// between the two would otherwise kill the process, saying nothing.
		p.waitSigs = make(chan os.Signal, 1)
		signal.Notify(p.waitSigs, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(p.waitSigs)
	}
	if p.positions() {
		// Each batch counts the tasks ahead of it before it is stored:
		// batches in flight together would count the same ones.
		p.inFlight = 1
	}
	defer p.printer.Flush()

	pushCtx, interrupted, stop := a.watchInterrupts(ctx, f.waitRoom)
	p.stopWaiting = interrupted
	if len(f.commands) > 0 {
		err = p.pushCommands(pushCtx, opts)
	} else {
		err = p.pushStdin(pushCtx, opts, interrupted)
	}
	stop()
	if err != nil {
		return err
	}
	wasInterrupted := false // while the -c commands or the last batches were pushed
	select {
	case <-interrupted:
		wasInterrupted = true
	default:
	}
	if f.then != "" {
		if !p.joinedGroup() {
			return usageError("--then: no task of this push joined group %s (%s), so it has no step to hold", group, p.noneJoined())
		}
		if err := a.pushThen(ctx, q, group, f.then, require, opts.env, f.cwd); err != nil {
			// The tasks are in: a usage exit would read as nothing done.
			return failure(fmt.Errorf("the tasks were pushed (group %s), but its step was not held: %w; hold a step with: %s",
				group, err, a.commandHint("group "+shellword.Quote(group)+" then "+shellword.Quote(f.then))))
		}
	}
	if !f.wait {
		return nil
	}
	return p.waitForPushed(ctx, wasInterrupted)
}

// waitForPushed is push --wait's wait for the tasks it stored; those of
// unknown outcome are named, not waited for. interrupted says a signal
// came while pushing.
func (p *pusher) waitForPushed(ctx context.Context, interrupted bool) error {
	a, f := p.a, p.f
	if err := p.printer.Flush(); err != nil {
		return failure(err)
	}
	w := &waiter{a: a, q: p.q, asJSON: f.asJSON, timeout: f.waitTimeout, lines: p.idLines, fromCommands: len(f.commands) > 0, progress: a.toPerson(),
		interrupted: interrupted, since: p.since, old: p.skippedIDs, marks: p.marks, sigs: p.waitSigs}
	if len(p.unknownIDs) == 0 {
		return w.run(ctx, p.ids)
	}
	var err error
	if len(p.ids) > 0 {
		err = w.run(ctx, p.ids)
	}
	// Not known to be queued, they cannot be waited for; nor can the push
	// say that they succeeded.
	note := fmt.Sprintf("%s of unknown outcome not waited for (they may not be queued; a wait for a task that is not queued ends only with --timeout); %s",
		nTasks(len(p.unknownIDs)), resumeHint(a, p.unknownIDs, p.since))
	if err != nil {
		return &exitError{code: exitCode(err), err: fmt.Errorf("%w\n%s", err, note)}
	}
	return failure(errors.New(note))
}

// clockSlack is how much earlier than the push push --wait takes records
// to count from: records are timed by the clock of the worker that wrote
// them, which may be a little behind this machine's.
const clockSlack = time.Second

// needRecords refuses --skip-succeeded, --wait, --then, --after and
// --after-group where the queue keeps no result records.
func needRecords(ctx context.Context, q *jobq.Queue, f pushFlags) error {
	for _, c := range []struct {
		on   bool
		what string
	}{{f.skipSucc, "push --skip-succeeded"}, {f.wait, "push --wait"}, {f.then != "", "push --then"},
		{len(f.after) > 0, "push --after"}, {len(f.afterGroups) > 0, "push --after-group"}} {
		if !c.on {
			continue
		}
		if err := checkResults(q, c.what); err != nil {
			return err
		}
		if err := checkKeepsRecords(ctx, q, c.what); err != nil {
			return err
		}
	}
	return nil
}

// checkUniqueFor refuses push --unique-for before anything is pushed
// where the queue keeps no result records, and warns where the backend
// does not drop a task ID it holds already.
func (a *app) checkUniqueFor(ctx context.Context, q *jobq.Queue) error {
	if err := checkResults(q, "push --unique-for"); err != nil {
		return err
	}
	if err := checkKeepsRecords(ctx, q, "push --unique-for"); err != nil {
		return err
	}
	if q.Capabilities().Level(driver.Dedup) == driver.Unsupported {
		a.log.Warn("--unique-for refuses the tasks that ended within the window; a task still queued or running is queued again, as this backend does not drop a task ID it holds already")
	}
	return nil
}

// positions reports whether push asks for each task's position: only for
// --print-ids --json, which prints it, as it costs a count per batch.
func (p *pusher) positions() bool { return p.f.printIDs && p.f.asJSON }

// pushedJSON is one pushed task as push --print-ids --json prints it.
type pushedJSON struct {
	ID        string `json:"id"`
	Line      int    `json:"line"`
	Duplicate bool   `json:"duplicate"`
	Position  *int64 `json:"position"`
}

// printID prints a pushed task's ID (--print-ids), as a JSON object with
// --json.
func (p *pusher) printID(r jobq.PushResult, line int) {
	if !p.f.asJSON {
		fmt.Fprintln(p.printer, r.ID)
		return
	}
	out := pushedJSON{ID: r.ID, Line: line, Duplicate: r.Duplicate}
	if r.Position >= 0 {
		pos := r.Position
		out.Position = &pos
	}
	b, _ := json.Marshal(out) // strings, ints and a bool always encode
	p.printer.Write(append(b, '\n'))
}

// checkPushFlags rejects push flags that cannot be used, applies
// --dedup-window, and returns what every task line shares.
func (a *app) checkPushFlags(f pushFlags) (lineOpts, error) {
	env, err := parseEnvFlags(f.env)
	if err != nil {
		return lineOpts{}, err
	}
	if f.priority < driver.MinPriority || f.priority > driver.MaxPriority {
		return lineOpts{}, usageError("--priority %d is out of range; use %d..%d", f.priority, driver.MinPriority, driver.MaxPriority)
	}
	if f.asJSON && !f.printIDs && !f.wait {
		return lineOpts{}, usageError("--json changes what --print-ids and --wait print; give one of them with it")
	}
	if f.waitTimeout > 0 && !f.wait {
		return lineOpts{}, usageError("--wait-timeout limits --wait; give --wait with it")
	}
	if f.dedupWindow != 0 {
		if err := a.setDedupWindow(f.dedupWindow); err != nil {
			return lineOpts{}, err
		}
	}
	if err := checkAfterValues(f); err != nil {
		return lineOpts{}, err
	}
	for _, kv := range [][2]string{{"--bg-dirsync-to", f.dirsync}, {"--cwd", f.cwd}} {
		if !utf8.ValidString(kv[1]) {
			return lineOpts{}, usageError("%s is not valid UTF-8 text", kv[0])
		}
	}
	for _, e := range env {
		if !utf8.ValidString(e.Name) || !utf8.ValidString(e.Value) {
			return lineOpts{}, usageError("-e %q is not valid UTF-8 text", e.Name)
		}
	}
	return lineOpts{env: env, dirsync: f.dirsync, cwd: f.cwd}, nil
}

// checkAfterValues refuses an empty --after ID or --after-group name (an
// unset shell variable, a trailing comma): left out, the tasks would run
// without the dependency that was meant. So too a blank --then, which
// held no step, and a blank --group, which made a group of a blank name
// (or, empty, one of a new name).
func checkAfterValues(f pushFlags) error {
	if f.thenSet && strings.TrimSpace(f.then) == "" {
		return usageError("--then is empty; give the command the group's step runs (--then 'python aggregate.py'), or leave --then out")
	}
	if f.groupSet && strings.TrimSpace(f.group) == "" {
		return usageError("--group %q is blank; give the group a name (--group sweep-7), or leave --group out for a new one", f.group)
	}
	for _, v := range f.after {
		if slices.Contains(afterIDs(v), "") {
			return usageError("--after %q has an empty task ID; give the IDs of the tasks to run after, comma-separated", v)
		}
	}
	for _, g := range f.afterGroups {
		if strings.TrimSpace(g) == "" {
			return usageError("--after-group is empty; give the name of the group to run after")
		}
	}
	return nil
}

// watchInterrupts returns a context for pushing and a channel closed on
// the first SIGINT or SIGTERM, which stops reading and lets the batches in
// flight finish (with waitRoom, a batch waiting for room stops waiting: it
// is not stored); a second signal cancels the context, abandoning them.
// stop undoes both.
func (a *app) watchInterrupts(ctx context.Context, waitRoom bool) (pushCtx context.Context, interrupted <-chan struct{}, stop func()) {
	msg := "interrupted: reading no more input; finishing the batches in flight (signal again to abandon them)"
	if waitRoom {
		msg = "interrupted: reading no more input; finishing the batches in flight, except those waiting for room, which stop waiting (signal again to abandon them)"
	}
	pushCtx, cancel := context.WithCancelCause(ctx)
	first := make(chan struct{})
	var once sync.Once
	interrupt := func(s os.Signal) {
		once.Do(func() {
			close(first) // before the log line: the push may be ending
			a.log.Warn(msg, "signal", s.String())
		})
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigs:
			interrupt(s)
		case <-pushCtx.Done():
			return
		}
		select {
		case s := <-sigs:
			cancel(fmt.Errorf("interrupted twice (%s)", s))
		case <-pushCtx.Done():
		}
	}()
	return pushCtx, first, func() {
		signal.Stop(sigs)
		cancel(nil)
		<-done
		// A signal that came as the push ended still counts: the caller
		// reads interrupted next, and no one else will see it.
		select {
		case s := <-sigs:
			interrupt(s)
		default:
		}
	}
}

// pushCommands pushes the -c commands, numbered from 1 in errors.
func (p *pusher) pushCommands(ctx context.Context, opts lineOpts) error {
	for i, c := range p.f.commands {
		t, perr := parseTaskLine(c, opts)
		if perr != nil {
			return p.stopped(ctx, i+1, asUsage(fmt.Errorf("-c %s (command %d): %w", truncateFlag(c), i+1, perr)))
		}
		if err := p.add(ctx, t, i+1); err != nil {
			return p.stopped(ctx, i+1, fmt.Errorf("-c %s (command %d): %w", truncateFlag(c), i+1, err))
		}
	}
	if err := p.flush(ctx); err != nil && !p.onlyUnknown() {
		return p.failed(len(p.f.commands)+1, err)
	}
	p.report()
	return nil
}

// pushStdin pushes one task per line of standard input until its end or
// the first interrupt.
func (p *pusher) pushStdin(ctx context.Context, opts lineOpts, interrupted <-chan struct{}) error {
	p.startProgress()
	if p.bar != nil {
		defer p.bar.Finish()
	}
	chunks := make(chan lineChunk, 2)
	go readLines(p.a.stdin, chunks)
	lineNo := 1
	for {
		var c lineChunk
		var ok bool
		select {
		case c, ok = <-chunks:
		case <-interrupted:
			return p.stopped(ctx, lineNo, &exitError{code: ExitFailure, err: errors.New("interrupted")})
		}
		if !ok {
			break
		}
		var err error
		if lineNo, err = p.addLines(ctx, c, lineNo, opts); err != nil {
			return err
		}
	}
	if err := p.flush(ctx); err != nil && !p.onlyUnknown() {
		return p.failed(lineNo, err)
	}
	if p.bar != nil {
		_ = p.bar.Finish()
	}
	p.report()
	return nil
}

// onlyUnknown reports, after every batch has ended, whether each task the
// push did not store has an unknown outcome: its push went unanswered, so
// it may be queued, and none was refused or left unsent.
func (p *pusher) onlyUnknown() bool {
	return len(p.pending) == 0 && len(p.batch) == 0 && p.firstLost == 0 && len(p.unknownIDs) > 0
}

// joinedGroup reports whether a task of this push joined its group (or
// may have: an outcome is unknown). The group exists only then: a
// duplicate stays in the group of its first push.
func (p *pusher) joinedGroup() bool {
	return p.group != "" && !p.noGroup.Load() && (p.pushed-p.skipped > p.dups || p.resent > 0 || len(p.unknownIDs) > 0)
}

// noneJoined says why no task of the push joined its group, for --then.
func (p *pusher) noneJoined() string {
	switch {
	case p.skipped > 0 && p.skipped == p.pushed:
		return fmt.Sprintf("all %d succeeded already and were left out by --skip-succeeded: nothing is left to run; to run the step anyway, push it as an ordinary task", p.skipped)
	case p.skipped > 0:
		return fmt.Sprintf("%d succeeded already and were left out by --skip-succeeded, and the others were queued already, in their first push's group", p.skipped)
	}
	return "there were none, or all were queued already, in their first push's group"
}

// report logs the push's summary line and, when some outcomes are
// unknown or some tasks were sent twice, what that means and what to
// check. The duplicate count is "unknown" then: the backend's answer
// cannot tell a task's earlier copy from one its unanswered push stored.
func (p *pusher) report() {
	var dups any = p.dups
	if p.resent > 0 || len(p.unknownIDs) > 0 {
		dups = "unknown"
	}
	attrs := []any{"tasks", p.pushed - p.skipped, "duplicates", dups}
	if p.f.skipSucc {
		attrs = append(attrs, "skipped", p.skipped)
	}
	if p.joinedGroup() {
		attrs = append(attrs, "group", p.group)
	}
	if n := len(p.unknownIDs); n > 0 {
		attrs = append(attrs, "unknown", n)
	}
	if p.resent > 0 {
		attrs = append(attrs, "resent", p.resent)
	}
	p.a.log.Info("pushed", append(attrs, "queue", hooks.URL(p.q))...)
	if n := len(p.unknownIDs); n > 0 {
		fmt.Fprintf(p.a.stderr, "jobq: %s; %s\n", p.unknownSummary(), p.unknownAdvice())
	}
	if p.resent > 0 {
		twice := "is queued once (this backend drops a task ID it holds already), but the duplicate count cannot tell that attempt's copy from one pushed earlier"
		if !p.dedups() {
			twice = "may be queued twice (this backend does not drop a task ID it holds already), so it may run twice"
		}
		fmt.Fprintf(p.a.stderr, "jobq: %s of those stored were sent again after an attempt whose answer was lost: each %s; check with: %s\n", nTasks(p.resent), twice, p.a.commandHint("size"))
	}
}

// nTasks says "1 task" or "N tasks".
func nTasks(n int) string {
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}

// dedups reports whether the queue drops a pushed task whose ID it holds
// already, so that pushing a task again stores no second copy.
func (p *pusher) dedups() bool {
	return p.q.Capabilities().Level(driver.Dedup) != driver.Unsupported
}

// unknownSummary says how many tasks may have been stored, and which
// input lines (or -c commands) they were.
func (p *pusher) unknownSummary() string {
	return fmt.Sprintf("%s may have been stored (outcome unknown: the queue's answer was lost after the request was sent): %s %s",
		nTasks(len(p.unknownIDs)), p.what(), spanList(p.unknown))
}

// unknownAdvice says how to find out what became of the tasks of unknown
// outcome, and what pushing them again does on this backend.
func (p *pusher) unknownAdvice() string {
	ids := p.unknownIDs
	more := ""
	if len(ids) > maxListed {
		ids, more = ids[:maxListed], fmt.Sprintf(" and %d more", len(p.unknownIDs)-maxListed)
	}
	check := "check with: " + p.a.commandHint("size") + ", " + p.a.commandHint("peek")
	if p.q.Capabilities().Level(driver.Results) != driver.Unsupported {
		check += ", or " + p.a.commandHint("result ID") + " once a worker has run them"
	}
	again := "pushing them again is safe: this backend drops a task ID it holds already"
	if !p.dedups() {
		again = "pushing them again may queue them twice, as this backend does not drop a task ID it holds already (tasks run at least once; see docs/reliability.md)"
	}
	return fmt.Sprintf("%s (IDs %s%s); %s", check, strings.Join(ids, ", "), more, again)
}

// startProgress tells a person at a terminal where tasks are read from,
// and shows a progress bar when standard error is a terminal.
func (p *pusher) startProgress() {
	a := p.a
	if file, ok := a.stdin.(*os.File); ok && isatty.IsTerminal(file.Fd()) {
		fmt.Fprintln(a.stderr, "jobq: reading tasks from standard input, one per line; end with Ctrl-D (use -c to push a single command)")
	}
	if a.toPerson() {
		// The count and rate are in the description (progressText): the
		// bar's own rate divides the first batch by microseconds.
		p.barStart = time.Now()
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(a.stderr),
			progressbar.OptionSetDescription(progressText(0, 0)),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
}

// minRateWindow is how long a push runs before its progress shows a rate.
const minRateWindow = time.Second

// progressText is the progress line of a push that stored n tasks in
// elapsed: the count, and the rate once there is enough time to measure.
func progressText(n int, elapsed time.Duration) string {
	text := "pushed " + nTasks(n)
	if elapsed >= minRateWindow {
		text += fmt.Sprintf(", %.0f tasks/s", float64(n)/elapsed.Seconds())
	}
	return text
}

// addLines parses and queues the lines of c, the first being input line
// lineNo, and returns the number of the next line. On an error it has
// already stopped the push (see stopped).
func (p *pusher) addLines(ctx context.Context, c lineChunk, lineNo int, opts lineOpts) (int, error) {
	for _, line := range c.lines {
		t, perr := parseTaskLine(line, opts)
		if perr != nil {
			return lineNo, p.stopped(ctx, lineNo, asUsage(fmt.Errorf("line %d: %w", lineNo, perr)))
		}
		if err := p.add(ctx, t, lineNo); err != nil {
			return lineNo, p.stopped(ctx, lineNo, fmt.Errorf("line %d: %w", lineNo, err))
		}
		lineNo++
	}
	if c.err != nil {
		return lineNo, p.stopped(ctx, lineNo, fmt.Errorf("reading standard input at line %d: %w", lineNo, c.err))
	}
	return lineNo, nil
}

// lineChunk is a run of lines read from standard input, each with its
// newline (the last line of the input may have none), or the read error
// that ended the input.
type lineChunk struct {
	lines []string
	err   error
}

// readLines sends the lines of r to out in chunks, without waiting for a
// full chunk when no more input is buffered, and closes out at the end.
// It runs on its own goroutine so that an interrupt is seen even while a
// read blocks.
func readLines(r io.Reader, out chan<- lineChunk) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			lines = append(lines, line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				out <- lineChunk{lines: lines, err: err}
				return
			}
			if len(lines) > 0 {
				out <- lineChunk{lines: lines}
			}
			return
		}
		if len(lines) >= 256 || br.Buffered() == 0 {
			out <- lineChunk{lines: lines}
			lines = nil
		}
	}
}

// add applies the shared flags to t and queues it for the next batch.
func (p *pusher) add(ctx context.Context, t *jobq.Task, line int) error {
	t.NumRetries = p.f.numRetries
	t.Priority = p.f.priority
	t.GateCmd = p.f.gateCmd
	t.ConcurrencyKey = p.f.concKey
	t.RateLimitKey = p.f.rateKey
	// As ai4s-jobq's push --wait: the producer wants the task's result.
	t.ReplyRequested = p.f.wait
	t.RetryBackoff = p.f.backoff
	t.TimeLimit = p.f.timeLimit
	if !p.noGroup.Load() {
		t.Group = p.group
	}
	p.f.applyAfter(t)
	if p.f.delay > 0 {
		t.NotBefore = time.Now().Add(p.f.delay)
	}
	// Checked here, so that a bad task is reported by its line before
	// the batch it would join is sent.
	if err := t.Validate(); err != nil {
		return asUsage(err)
	}
	p.batch = append(p.batch, t)
	p.lines = append(p.lines, line)
	if len(p.batch) >= pushBatchSize {
		return p.send(ctx)
	}
	return nil
}

// send starts pushing the accumulated batch, first waiting for the oldest
// batch in flight when inFlight are.
func (p *pusher) send(ctx context.Context) error {
	if len(p.batch) == 0 {
		return nil
	}
	for len(p.pending) >= p.inFlight || (len(p.pending) > 0 && hasAfter(p.batch)) {
		// A task with dependencies waits for the batches before it: its
		// parents may be among them.
		if err := p.collect(); err != nil {
			return err
		}
	}
	tasks := p.batch
	job := &pushJob{done: make(chan struct{}), lines: p.lines, tasks: tasks}
	p.batch = make([]*jobq.Task, 0, pushBatchSize)
	p.lines = make([]int, 0, pushBatchSize)
	p.pending = append(p.pending, job)
	// Read here, in input order, before the batch goes: a batch in flight
	// may hold a task of the same ID, whose end must not be marked.
	if p.marks != nil {
		if err := hooks.MarkRecords(ctx, p.q, tasks, p.marks); err != nil {
			job.err = fmt.Errorf("reading the result records of the tasks before pushing them (for --wait): %w", err)
			close(job.done)
			return nil
		}
	}
	go func() {
		defer close(job.done)
		job.res, job.err = p.pushBatch(ctx, tasks)
	}()
	return nil
}

// pushBatch pushes one batch. With --wait-for-room, a batch larger than
// the queue's max-depth, which the library refuses at once since it could
// never fit whole (and stores none of it), goes again in parts, in order,
// each the size of the room the refusal saw (at least one task), each
// waiting for that much room.
func (p *pusher) pushBatch(ctx context.Context, tasks []*jobq.Task) ([]jobq.PushResult, error) {
	opts := jobq.PushOptions{WaitForRoom: p.f.waitRoom, OnFull: p.waiting, StopWaiting: p.stopWaiting, Position: p.positions(),
		UniqueFor: p.f.uniqueFor, SkipSucceeded: p.f.skipSucc}
	res, err := p.q.PushBatch(ctx, tasks, opts)
	if err != nil && len(res) == 0 && p.mayDropGroup(err) {
		for _, t := range tasks {
			t.Group = ""
		}
		refused := err
		res, err = p.q.PushBatch(ctx, tasks, opts)
		if err == nil || len(res) > 0 {
			p.droppedGroup(refused)
		}
	}
	var qf *driver.QueueFullError
	if err == nil || !p.f.waitRoom || len(res) > 0 || !errors.As(err, &qf) || qf.MaxDepth <= 0 || int64(len(tasks)) <= qf.MaxDepth {
		return res, err
	}
	part := int(max(1, min(qf.MaxDepth-qf.Depth, qf.MaxDepth)))
	var out []jobq.PushResult
	for start := 0; start < len(tasks); start += part {
		r, err := p.q.PushBatch(ctx, tasks[start:min(start+part, len(tasks))], opts)
		out = append(out, r...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// mayDropGroup reports whether a batch refused with err may go again
// without its group: the group is the one the push made up (no --group,
// and nothing of the push needs it), and the refusal may be the result
// container's, which keeps it, refusing the credentials.
func (p *pusher) mayDropGroup(err error) bool {
	return p.group != "" && p.f.group == "" && p.f.then == "" && !p.f.wait && !p.f.skipSucc && len(p.f.afterGroups) == 0 &&
		errcode.Of(err) == errcode.PermissionDenied
}

// droppedGroup notes that a batch refused with err went through without
// its group, so the refusal was the group's: the first time, it is logged,
// and later batches are pushed without the group. A batch refused again
// without it says nothing of the group (the queue itself refused the
// credentials, on any backend), and the push's error says so alone.
func (p *pusher) droppedGroup(err error) {
	p.noGroupOnce.Do(func() {
		p.noGroup.Store(true)
		p.a.log.Warn("the push's group could not be recorded: the credentials may not write the result container; pushing without a group (give them Blob Storage rights to follow pushes with `group`)",
			"group", p.group, "error", err)
	})
}

// record notes the results of a finished batch.
func (p *pusher) record(job *pushJob) {
	for i, r := range job.res {
		if r.Duplicate {
			p.dups++
		}
		if r.Skipped {
			p.skipped++
			if p.f.wait {
				if p.skippedIDs == nil {
					p.skippedIDs = map[string]bool{}
				}
				p.skippedIDs[r.ID] = true
			}
		}
		if r.Resent {
			p.resent++
		}
		if p.f.printIDs {
			p.printID(r, job.lines[i])
		}
		if p.f.wait {
			if _, seen := p.idLines[r.ID]; !seen {
				p.ids = append(p.ids, r.ID)
			}
			p.idLines[r.ID] = append(p.idLines[r.ID], job.lines[i])
		}
	}
	p.pushed += len(job.res)
	if p.bar != nil {
		p.bar.Describe(progressText(p.pushed, time.Since(p.barStart)))
		_ = p.bar.Add(len(job.res))
	}
	if n := len(job.res); n > 0 {
		p.stored = addSpan(p.stored, job.lines[0], job.lines[n-1])
	}
	// The tasks after the stored prefix: unknown where their push went
	// unanswered, else not stored.
	var be *jobq.BatchError
	errors.As(job.err, &be)
	for i := len(job.res); i < len(job.lines); i++ {
		if be != nil && i < len(be.Errs) && hooks.MaybeApplied(be.Errs[i]) {
			p.unknown = addSpan(p.unknown, job.lines[i], job.lines[i])
			p.unknownIDs = append(p.unknownIDs, job.tasks[i].ID)
			continue
		}
		if p.firstLost == 0 || job.lines[i] < p.firstLost {
			p.firstLost = job.lines[i]
		}
	}
}

// addSpan adds lines from..to (consecutive in the input) to spans, sorted
// closed ranges, merging neighbours.
func addSpan(spans []lineSpan, from, to int) []lineSpan {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].from > from })
	spans = slices.Insert(spans, i, lineSpan{from, to})
	merged := spans[:1]
	for _, s := range spans[1:] {
		if last := &merged[len(merged)-1]; s.from <= last.to+1 {
			last.to = max(last.to, s.to)
		} else {
			merged = append(merged, s)
		}
	}
	return merged
}

// spanList formats spans as "1–3, 7".
func spanList(spans []lineSpan) string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = fmt.Sprintf("%d–%d", s.from, s.to)
		if s.from == s.to {
			out[i] = fmt.Sprint(s.from)
		}
	}
	return strings.Join(out, ", ")
}

// collect waits for the oldest batch in flight and records its results.
// When the batch failed, it waits for the others too and returns the error.
func (p *pusher) collect() error {
	job := p.pending[0]
	p.pending = p.pending[1:]
	<-job.done
	p.record(job)
	if job.err != nil {
		p.drain()
		return job.err
	}
	return nil
}

// drain waits for every batch in flight and records its results.
func (p *pusher) drain() {
	for _, other := range p.pending {
		<-other.done
		p.record(other)
	}
	p.pending = nil
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

// stopped handles input that ends early at line next (a bad line, a read
// error, an interrupt): it pushes the tasks read before it, then reports
// cause with what was stored and where to resume.
func (p *pusher) stopped(ctx context.Context, next int, cause error) error {
	if err := p.flush(ctx); err != nil {
		return p.failed(next, err)
	}
	// Nothing at or after next was sent.
	return &exitError{code: exitCode(cause), err: fmt.Errorf("%w; %s%s", cause, p.summary(next), p.notWaited())}
}

// failed reports a push error with what was stored and where to resume;
// next is the first input line not read into a batch.
func (p *pusher) failed(next int, err error) error {
	p.drain()
	for _, l := range p.lines {
		if p.firstLost == 0 || l < p.firstLost {
			p.firstLost = l
		}
	}
	code := ExitFailure
	// Refused for what the push asked (a task too large, a parent ID or
	// group that does not exist, a parent dead-lettered or cancelled
	// already), with nothing of the refused batch stored: a usage error,
	// whichever code the refusal has (a missing queue, NotFound too, only
	// while nothing was stored). A FailedPrecondition within a
	// *jobq.BatchError is a task not sent because another failed.
	var be *jobq.BatchError
	c := errcode.Of(err)
	if c == errcode.InvalidArgument || c == errcode.TooLarge || (c == errcode.NotFound && p.pushed == 0) ||
		(c == errcode.FailedPrecondition && !errors.As(err, &be)) {
		code = ExitUsage
	}
	return &exitError{code: code, err: fmt.Errorf("%w; %s%s", err, p.summary(next), p.notWaited())}
}

// notWaited tells a push --wait that stopped early how to wait for the
// tasks it stored; empty otherwise.
func (p *pusher) notWaited() string {
	if !p.f.wait || len(p.ids) == 0 {
		return ""
	}
	return "\nthe stored tasks were not waited for; " + resumeHint(p.a, p.ids, p.since)
}

// summary says how many tasks were stored, which input lines (or -c
// commands) they were, which may have been stored (outcome unknown), and
// where to resume: at the first line not known to be stored, so that a
// task of unknown outcome is pushed again rather than perhaps lost. next
// is the first line that was not read into a batch.
func (p *pusher) summary(next int) string {
	resume := ""
	from := next
	if p.firstLost != 0 && p.firstLost < from {
		from = p.firstLost
	}
	if len(p.unknown) > 0 && p.unknown[0].from < from {
		from = p.unknown[0].from
	}
	if len(p.f.commands) == 0 {
		resume = "; resume with: " + p.a.resumePushHint(from, p.f.flagsHint)
	}
	var parts []string
	switch {
	case p.pushed > 0:
		parts = append(parts, p.storedSummary())
	case len(p.unknownIDs) == 0:
		parts = append(parts, "no task was stored")
	}
	if len(p.unknownIDs) > 0 {
		parts = append(parts, p.unknownSummary(), p.unknownAdvice())
	}
	if resume != "" {
		after := linesFrom(p.stored, from)
		if after > 0 {
			resume += fmt.Sprintf(" (%d of those lines are stored already and would be pushed again, with the same IDs)", after)
		}
	}
	return strings.Join(parts, "; ") + resume
}

// storedSummary says how many tasks the push stored and which input lines
// (or -c commands) it got through. Lines whose task was a duplicate (queued
// already, or ended within --unique-for) or left out by --skip-succeeded
// are through but stored nothing, so they are counted apart; where an attempt
// went unanswered the duplicate count is not known, and all are counted.
func (p *pusher) storedSummary() string {
	if (p.dups == 0 && p.skipped == 0) || p.resent > 0 || len(p.unknownIDs) > 0 {
		return fmt.Sprintf("stored %d tasks: %s %s", p.pushed, p.what(), spanList(p.stored))
	}
	var apart []string
	if p.dups > 0 {
		apart = append(apart, countOf(int64(p.dups), "duplicate")+", not stored again")
	}
	if p.skipped > 0 {
		apart = append(apart, fmt.Sprintf("%d left out by --skip-succeeded", p.skipped))
	}
	return fmt.Sprintf("stored %s (%s %s: %s)", countOf(int64(p.pushed-p.dups-p.skipped), "task"), p.what(), spanList(p.stored), strings.Join(apart, ", "))
}

// what names the units of the input: lines, or -c commands.
func (p *pusher) what() string {
	if len(p.f.commands) > 0 {
		return "commands (-c, in order)"
	}
	return "lines"
}

// linesFrom counts the lines of spans at or after line from.
func linesFrom(spans []lineSpan, from int) int {
	n := 0
	for _, s := range spans {
		if s.to >= from {
			n += s.to - max(s.from, from) + 1
		}
	}
	return n
}

// setDedupWindow applies --dedup-window: on Service Bus it is the queue
// URL's dedup_window (the window of a queue that push creates); elsewhere
// it does not apply and is ignored with a warning.
func (a *app) setDedupWindow(d time.Duration) error {
	raw, err := a.queueURL()
	if err != nil {
		return err
	}
	u, perr := url.Parse(queueurl.Normalize(raw))
	if perr != nil || (u.Scheme != "sb" && u.Scheme != "servicebus") {
		a.log.Warn("--dedup-window applies to Service Bus queues only; ignored", "queue", redact.URL(raw))
		return nil
	}
	qs := u.Query()
	if have := qs.Get("dedup_window"); have != "" {
		if hd, err := time.ParseDuration(have); err != nil || hd != d {
			return usageError("--dedup-window %s disagrees with dedup_window=%s in the queue URL; give one of them", formatDuration(d), have)
		}
		return nil
	}
	qs.Set("dedup_window", d.String())
	u.RawQuery = qs.Encode()
	a.resolved = u.String()
	return nil
}

// truncateFlag quotes a -c value for an error message, shortened.
func truncateFlag(s string) string {
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strconv.Quote(s)
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
