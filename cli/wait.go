package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/recmarks"
	"github.com/jobq/jobq/internal/redact"
)

// maxListed is how many failed or pending tasks a summary names one by
// one; pending IDs beyond it go to a file for `jobq QUEUE wait -`.
const maxListed = 20

// The causes that end a wait early.
var (
	errWaitInterrupted = errors.New("interrupted")
	errWaitTimedOut    = errors.New("timed out")
)

func (a *app) waitCommand() *cobra.Command {
	var f waitFlags
	cmd := &cobra.Command{
		Use:   "wait ID... [flags]",
		Short: "Wait for tasks to end and print each outcome as it arrives",
		Long: `Wait until every given task has ended — succeeded, dead-lettered or
cancelled — printing one line per task as it ends:

  ID STATE [exit=N] [value=JSON] [error="..."]

value is a Go handler's return value. A task that ended before the wait
started (within the queue's retention) is printed at once. An ID that no
task has (a typo, or a record that expired) is waited for like a task that
has not ended: give --timeout when that may happen. A task with a
cancel pending is named on standard error when the wait starts: it ends
when a worker stops it, or, where the backend cannot remove tasks by ID
(azqueue, servicebus), only once a task with its ID is pushed. '-' reads more
IDs from standard input, one per line (what push --print-ids prints, plain
or --json).

When standard error is a terminal (without -q), one line there counts
the tasks ended, running and queued, with the rate and an ETA, redrawn in
place.

Exit 0 when every task succeeded; otherwise 1, with a summary of the tasks
that did not succeed on standard error. Ctrl-C or --timeout stops the
waiting, not the tasks: the summary says which are still running and how
to resume.

Backends that keep result records can be waited on (see 'jobq backends',
results); the wait is woken by the engine where it can be (Postgres
LISTEN/NOTIFY, Redis), and polls otherwise.`,
		Example: `  jobq sqlite://./work.db wait 5d41402abc4b2a76b9719d911017c592
  jobq sqlite://./work.db push --print-ids -c 'make a' -c 'make b' > ids.txt
  jobq sqlite://./work.db wait - < ids.txt
  jobq sqlite://./work.db wait - --json --timeout 1h < ids.txt | jq -r .state`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ids, err := taskIDs(args, a.stdin)
			if err != nil {
				return err
			}
			return a.withQueue(ctx, func(q *jobq.Queue) error {
				if err := checkResults(q, "wait"); err != nil {
					return err
				}
				w := &waiter{a: a, q: q, asJSON: f.asJSON, timeout: f.timeout, progress: a.toPerson()}
				if f.since != "" {
					t, err := time.Parse(time.RFC3339Nano, f.since)
					if err != nil {
						return usageError("--since %q: not an RFC 3339 time (like 2026-11-29T20:45:00Z)", f.since)
					}
					w.since = t
				}
				return w.run(ctx, ids)
			})
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print each outcome as one JSON object per line (the schema of 'result --json', in docs/results.md)")
	fl.Var(durationFlag(&f.timeout), "timeout", "stop waiting after this long (exit 1, the tasks keep running); 0: wait as long as it takes")
	fl.StringVar(&f.since, "since", "", "report only ends recorded at or after this time (RFC 3339): a task pushed again after an earlier run of it ended has the same ID, and without --since that run's record is reported (push --wait's resume hint gives it)")
	return cmd
}

type waitFlags struct {
	asJSON  bool
	since   string
	timeout time.Duration
}

// checkResults fails with a usage error, before anything is pushed or
// waited for, when the queue's backend keeps no result records.
func checkResults(q *jobq.Queue, what string) error {
	if q.Capabilities().Level(driver.Results) == driver.Unsupported {
		msg := fmt.Sprintf("%s needs result records, which this backend does not keep", what)
		if fb := q.Capabilities().Features[driver.Results].Fallback; fb != "" {
			msg += " (" + fb + ")"
		}
		return usageError("%s; see docs/results.md and 'jobq backends' (results) for the backends that do", msg)
	}
	return nil
}

// checkKeepsRecords refuses what (push --wait) before anything is pushed
// when the queue's results policy keeps no records, so the wait could
// never end. A backend without policies keeps every record.
func checkKeepsRecords(ctx context.Context, q *jobq.Queue, what string) error {
	pols, err := q.Admin().Policies(ctx)
	if err != nil {
		return nil // no policy store: records are kept; other errors show at the wait
	}
	for _, p := range pols {
		if p.Kind == driver.ResultsPolicy && driver.ResultsMode(p.Limit) == driver.ResultsNone {
			return usageError("%s needs result records, but the queue's results policy is none (no task keeps one); keep them with `jobq QUEUE policy set results all` (or `results failed`), or leave %s out", what, strings.TrimPrefix(what, "push "))
		}
	}
	return nil
}

// waiter waits for tasks to end and prints each outcome as it arrives.
type waiter struct {
	a       *app
	q       *jobq.Queue
	asJSON  bool
	timeout time.Duration
	// lines maps each ID to the input lines (or -c positions) that pushed
	// it, for push --wait's summary; nil for wait. fromCommands says they
	// are -c positions.
	lines        map[string][]int
	fromCommands bool
	// interrupted: a signal came before the wait began (push --wait,
	// while it pushed): the wait stops at once, as if it came during it.
	interrupted bool
	// sigs, when set (push --wait), receives the signals that interrupt
	// the wait: registered before the push's own watch ends, so that a
	// signal between the two neither kills the process nor goes unseen.
	sigs chan os.Signal
	// since, when set, leaves out records written before it
	// (jobq.WaitOptions.After), except for the tasks in old, which
	// --skip-succeeded left out: their earlier record is their outcome.
	since time.Time
	old   map[string]bool
	// marks, set by push --wait, are the records its tasks had before the
	// push: an end counts when the record differs (jobq.WaitOptions from
	// hooks.MarkedWait), whatever the workers' clocks; since then bounds
	// only the dead letters read and the resume hint's wait.
	marks recmarks.Set

	// progress keeps a live line of counts on standard error while
	// waiting (a.toPerson(): a terminal, without -q); live is that line.
	progress bool
	live     *liveLine

	mu    sync.Mutex
	ended map[string]*jobq.Result
	// gone are the tasks not ended that the last look (watchGone) found
	// neither in the queue nor recorded.
	gone map[string]bool
	// early are the tasks warnEarly warned of.
	early map[string]bool
	// started is when the wait began; succeeded, nFailed and recent
	// (recorded since started) count the ends, for the live line.
	started                    time.Time
	succeeded, nFailed, recent int
}

// run waits for ids and returns nil when every one succeeded, else an
// exitError with the summary.
func (w *waiter) run(ctx context.Context, ids []string) error {
	w.ended = make(map[string]*jobq.Result, len(ids))
	if w.interrupted {
		return w.stopped(ids, "interrupted: stopped waiting")
	}
	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if w.timeout > 0 {
		var stop context.CancelFunc
		waitCtx, stop = context.WithTimeoutCause(waitCtx, w.timeout, errWaitTimedOut)
		defer stop()
	}
	sigs := w.sigs
	if sigs == nil {
		sigs = make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(sigs)
	}
	go func() {
		select {
		case <-sigs:
			cancel(errWaitInterrupted)
		case <-waitCtx.Done():
		}
	}()

	// A wait for no task checks at once that the queue can be waited on
	// (its results policy keeps records), before the notes below.
	if err := w.q.WaitFunc(waitCtx, nil, jobq.WaitOptions{}, nil); err != nil {
		return resultFailure(err)
	}
	w.noteCancels(waitCtx, ids)
	go w.watchGone(waitCtx, ids)
	w.started = time.Now()
	stopProgress := func() {}
	if w.progress {
		stopProgress = w.showProgress(waitCtx, ids)
		defer stopProgress()
	}
	err := w.waitAll(waitCtx, ids)
	stopProgress()
	if err != nil {
		cause := context.Cause(waitCtx)
		switch {
		case errors.Is(cause, errWaitInterrupted):
			return w.stopped(ids, "interrupted: stopped waiting")
		case errors.Is(cause, errWaitTimedOut):
			return w.stopped(ids, fmt.Sprintf("timed out after %s: stopped waiting", formatDuration(w.timeout)))
		case ctx.Err() != nil:
			return failure(err)
		}
		e := resultFailure(err)
		// Under results none (set during the wait) a resumed wait would
		// be refused too: no hint then.
		if p := w.pending(ids); len(p) > 0 && errcode.Of(err) != errcode.FailedPrecondition {
			// The wait failed, not the tasks: say how to wait for the
			// rest, the IDs push --wait pushed included.
			e = &exitError{code: exitCode(e), err: fmt.Errorf("%w; %d of %s %s not ended (stopping the wait does not stop them); %s",
				e, len(p), nTasks(len(ids)), hasHave(len(p)), resumeHint(w.a, p, w.since))}
		}
		return e
	}
	failed := w.failed(ids)
	if len(failed) > 0 {
		return failure(errors.New(w.failureSummary(len(ids), failed)))
	}
	w.a.log.Info("all tasks succeeded", "tasks", len(ids))
	return nil
}

// noteCancels says, on standard error, which of ids have a cancel pending
// (one lookup): such a task ends when a worker stops it, and, where the
// backend cannot remove tasks by ID (cancel not native), one that no
// message has only once it is pushed, so the wait could otherwise look
// hung. A failed lookup only skips the note.
func (w *waiter) noteCancels(ctx context.Context, ids []string) {
	asked, err := hooks.CancelRequested(ctx, w.q, ids)
	if err != nil || len(asked) == 0 {
		return
	}
	shown := asked[:min(len(asked), maxListed)]
	tasks, have := "tasks", "have"
	if len(asked) == 1 {
		tasks, have = "task", "has"
	}
	msg := fmt.Sprintf("%d %s %s a cancel pending and %s not ended: each ends when the worker that holds it, or next receives it, stops it", len(asked), tasks, have, have)
	if w.q.Capabilities().Level(driver.Cancel) != driver.Native {
		msg += "; this backend cannot remove tasks by ID, so one not pushed yet ends only once it is pushed: give --timeout"
	}
	w.a.log.Warn(msg, "ids", strings.Join(shown, " "))
}

// waitAll waits for ids: those in w.old as they are, the others for ends
// recorded since w.since, so that a task pushed again is not reported by
// its earlier run's record.
func (w *waiter) waitAll(ctx context.Context, ids []string) error {
	var old, fresh []string
	for _, id := range ids {
		if w.old[id] {
			old = append(old, id)
		} else {
			fresh = append(fresh, id)
		}
	}
	if len(old) > 0 {
		if err := w.q.WaitFunc(ctx, old, jobq.WaitOptions{}, w.print); err != nil {
			return err
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	opts := jobq.WaitOptions{After: w.since}
	if w.marks != nil {
		opts = hooks.MarkedWait(w.since, w.marks).(jobq.WaitOptions)
	}
	return w.q.WaitFunc(ctx, fresh, opts, w.print)
}

// goneEvery is how often watchGone looks for the tasks waited for.
const goneEvery = 30 * time.Second

// watchGone looks for the tasks not ended, when the wait starts and every
// goneEvery until ctx ends, and warns of those newly found neither in the
// queue nor recorded: a clear deleted them, their records expired, or
// (wait's IDs) they were never pushed. The wait goes on for them, since a
// task with the ID may yet be pushed, but the user should know. It stops
// where the backend cannot look tasks up by ID.
func (w *waiter) watchGone(ctx context.Context, ids []string) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		gone, early, ok, err := hooks.GoneTasks(ctx, w.q, w.pending(ids), w.since, w.marks)
		if !ok {
			return
		}
		t.Reset(goneEvery)
		if err != nil {
			continue
		}
		w.warnEarly(early)
		w.mu.Lock()
		var fresh []string
		for _, id := range gone {
			if !w.gone[id] {
				fresh = append(fresh, id)
			}
		}
		w.gone = make(map[string]bool, len(gone))
		for _, id := range gone {
			w.gone[id] = true
		}
		w.mu.Unlock()
		if len(fresh) > 0 {
			w.warnGone(fresh)
		}
	}
}

// warnEarly says, once for each task, that the tasks ids (those the wait
// counts from w.since) have ended but have records written before then,
// which the wait does not count: otherwise it looks hung.
func (w *waiter) warnEarly(ids []string) {
	w.mu.Lock()
	var fresh []string
	for _, id := range ids {
		if !w.old[id] && !w.early[id] {
			if w.early == nil {
				w.early = map[string]bool{}
			}
			w.early[id] = true
			fresh = append(fresh, id)
		}
	}
	w.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	what := fmt.Sprintf("%d tasks are not in the queue and ended, but their ends were recorded before %s, when this wait counts ends from: "+
		"the clock of a machine that ran them is behind this one's by more than a second, or they were cleared and the records are of earlier runs", len(fresh), w.since.UTC().Format(time.RFC3339Nano))
	if len(fresh) == 1 {
		what = fmt.Sprintf("1 task is not in the queue and ended, but its end was recorded before %s, when this wait counts ends from: "+
			"the clock of the machine that ran it is behind this one's by more than a second, or it was cleared and the record is of an earlier run", w.since.UTC().Format(time.RFC3339Nano))
	}
	w.a.log.Warn(what+". The wait goes on: see the outcome with `jobq QUEUE result ID`, or wait again with an earlier --since",
		"ids", strings.Join(fresh[:min(len(fresh), maxListed)], " "))
}

// warnGone says that the tasks ids are neither in the queue nor recorded.
func (w *waiter) warnGone(ids []string) {
	what := fmt.Sprintf("%d tasks are not in the queue (queued, running or held) and have no record of an end: cleared (`jobq QUEUE clear`), their records expired, or not pushed yet", len(ids))
	if len(ids) == 1 {
		what = "1 task is not in the queue (queued, running or held) and has no record of an end: cleared (`jobq QUEUE clear`), its record expired, or not pushed yet"
	}
	w.a.log.Warn(what+". The wait goes on until a task with the ID is pushed and ends: stop it with Ctrl-C, or give --timeout",
		"ids", strings.Join(ids[:min(len(ids), maxListed)], " "))
}

// goneOf counts the tasks of ids that the last look found gone.
func (w *waiter) goneOf(ids []string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, id := range ids {
		if w.gone[id] {
			n++
		}
	}
	return n
}

// print writes one outcome line (WaitFunc's callback).
func (w *waiter) print(r *jobq.Result) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended[r.ID] = endedOutcome(r)
	w.tally(r)
	if w.live != nil {
		return w.live.above(func() error { return w.write(r) })
	}
	return w.write(r)
}

// succeededOutcome stands for every succeeded task in waiter.ended.
var succeededOutcome = &jobq.Result{State: driver.ResultSucceeded}

// endedOutcome is what the wait keeps of r once printed: what the failure
// summary prints of it (outcomeLine), not its output tail, attempts or
// value, so that a wait on a million tasks does not hold their records.
func endedOutcome(r *jobq.Result) *jobq.Result {
	if r.State == driver.ResultSucceeded {
		return succeededOutcome
	}
	return &jobq.Result{ID: r.ID, State: r.State, ExitCode: r.ExitCode, Error: r.Error, Value: r.Value}
}

// write prints r's outcome line, or JSON object, on standard output.
func (w *waiter) write(r *jobq.Result) error {
	if w.asJSON {
		b, err := json.Marshal(toResultJSON(r))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w.a.stdout, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(w.a.stdout, outcomeLine(r))
	return err
}

// outcomeLine is a record on one line: ID STATE [exit=N] [value=JSON]
// [error="..."], the error's credentials redacted (--json prints it as
// stored).
func outcomeLine(r *jobq.Result) string {
	var b strings.Builder
	b.WriteString(r.ID)
	b.WriteByte(' ')
	b.WriteString(string(r.State))
	if r.ExitCode != nil {
		b.WriteString(" exit=")
		b.WriteString(strconv.Itoa(*r.ExitCode))
	}
	if len(r.Value) > 0 {
		b.WriteString(" value=")
		b.WriteString(compactJSON(r.Value))
	}
	if r.State != driver.ResultSucceeded && r.Error != "" {
		b.WriteString(" error=")
		b.WriteString(strconv.Quote(truncate(oneLine(redact.String(r.Error)), 200)))
	}
	return b.String()
}

// compactJSON is v without insignificant white space, or v as it is when
// it is not valid JSON.
func compactJSON(v json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}

// failed returns the records of ids that ended without succeeding, in the
// order of ids.
func (w *waiter) failed(ids []string) []*jobq.Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*jobq.Result
	for _, id := range ids {
		if r := w.ended[id]; r != nil && r.State != driver.ResultSucceeded {
			out = append(out, r)
		}
	}
	return out
}

// pending returns the ids that have not ended, in order.
func (w *waiter) pending(ids []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, id := range ids {
		if w.ended[id] == nil {
			out = append(out, id)
		}
	}
	return out
}

// failureSummary says how many of n tasks did not succeed, by state, and
// lists them (the first maxListed); failed is not empty.
func (w *waiter) failureSummary(n int, failed []*jobq.Result) string {
	byState := map[string]int{}
	for _, r := range failed {
		byState[string(r.State)]++
	}
	states := make([]string, 0, len(byState))
	for s := range byState {
		states = append(states, s)
	}
	sort.Strings(states)
	for i, s := range states {
		states[i] = fmt.Sprintf("%d %s", byState[s], s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %s did not succeed (%s):", len(failed), nTasks(n), strings.Join(states, ", "))
	for i, r := range failed {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", len(failed)-maxListed)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(outcomeLine(r))
		if lines := w.lines[r.ID]; len(lines) > 0 {
			b.WriteString(" (" + lineList(lines, w.fromCommands) + ")")
		}
	}
	// A command to copy as it stands: the queue may be quoted already.
	b.WriteString("\nsee a task's output tail and attempts with: " + w.a.commandHint("result "+failed[0].ID))
	return b.String()
}

// lineList names input lines, "line 7" or "lines 7, 21", or -c
// positions, "-c 2" or "-c 2, 5".
func lineList(lines []int, commands bool) string {
	parts := make([]string, len(lines))
	for i, l := range lines {
		parts[i] = strconv.Itoa(l)
	}
	switch {
	case commands:
		return "-c " + strings.Join(parts, ", ")
	case len(lines) == 1:
		return "line " + parts[0]
	}
	return "lines " + strings.Join(parts, ", ")
}

// stopped reports a wait ended early (Ctrl-C, --timeout): what ended, what
// did not succeed, and how to resume waiting for the rest.
func (w *waiter) stopped(ids []string, why string) error {
	pending := w.pending(ids)
	failed := w.failed(ids)
	// push --wait's tasks were stored; wait's IDs are the user's, which
	// may name no task (yet).
	state := "they stay queued or running"
	if len(pending) == 1 {
		state = "it stays queued or running"
	}
	if w.lines == nil {
		state = "queued, running or held, or not pushed yet"
	}
	if g := w.goneOf(pending); g > 0 {
		state = fmt.Sprintf("%d queued, running or held; %d neither in the queue nor recorded: cleared, record expired, or not pushed yet", len(pending)-g, g)
	}
	msg := fmt.Sprintf("%s; %d of %s ended, %d did not succeed; the other %d %s not ended (%s)",
		why, len(ids)-len(pending), nTasks(len(ids)), len(failed), len(pending), hasHave(len(pending)), state)
	if len(failed) > 0 {
		msg += "\n" + w.failureSummary(len(ids)-len(pending), failed)
	}
	msg += "\n" + resumeHint(w.a, pending, w.since)
	return failure(errors.New(msg))
}

// resumeHint is the `jobq QUEUE wait` command that waits for ids: with the
// IDs on the command line when they are few, else reading them from a file
// it writes in the temporary directory.
func resumeHint(a *app, ids []string, since time.Time) string {
	wait := "wait"
	if !since.IsZero() {
		wait += " --since " + since.UTC().Format(time.RFC3339Nano)
	}
	if len(ids) <= maxListed {
		return "resume with: " + a.commandHint(wait+" "+strings.Join(ids, " "))
	}
	f, err := os.CreateTemp("", "jobq-wait-*.ids")
	if err == nil {
		_, err = f.WriteString(strings.Join(ids, "\n") + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		a.log.Warn("could not write the IDs still to wait for to a file", "error", err)
		return fmt.Sprintf("resume with: %s (%d IDs; push --print-ids prints them)", a.commandHint(wait+" ID..."), len(ids))
	}
	return fmt.Sprintf("resume with: %s < %s (the %d IDs)", a.commandHint(wait+" -"), f.Name(), len(ids))
}
