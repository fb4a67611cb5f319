package worker

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/shellword"
)

// Shell is the Handler for command tasks. Each task runs as `bash -c CMD` in
// its own process group, with the worker's environment (Env) less the
// worker's own settings and credentials (see Withheld and PassEnv), plus
// the task's variables, JOBQ_TASK_ID and JOBQ_QUEUE_NAME — built afresh for
// each task, so nothing leaks from one task into the next — in the task's
// cwd when it has one. Its stdout and stderr are logged line by line; the
// last lines are kept for the dead-letter detail and, with the exit status,
// for the task's result record (jobq.Envelope.SetResult). A non-zero exit
// is a failure.
//
// When the task's context ends (lost lease, worker stopping, the task's
// time limit, a cancel) the process group gets SIGTERM, then SIGKILL after
// KillTimeout or as soon as the worker escalates (Job.Kill); a task so
// stopped has not succeeded, whatever its exit status. Background
// processes that still hold the output pipes OrphanGrace after the main
// process exited are killed with a warning.
type Shell struct {
	// Env is the base environment of every task. Defaults to os.Environ()
	// as it was when NewShell was called. The variables Withheld names are
	// removed from it unless PassEnv lists them.
	Env []string
	// PassEnv lists withheld variables that tasks get all the same: names,
	// or prefixes ending in '*' ("AWS_*"). See Withheld.
	PassEnv []string
	// KillTimeout is how long a stopped task has between SIGTERM and
	// SIGKILL. Defaults to 600 seconds.
	KillTimeout time.Duration
	// OrphanGrace is how long background processes may hold the output
	// open after the main process exited. Defaults to 3 seconds.
	OrphanGrace time.Duration
	// EmulateTTY runs the command under a pseudo-terminal (with script(1)),
	// so programs that buffer output when it is not a terminal write it line
	// by line. Stdout and stderr are then one stream.
	EmulateTTY bool
	// TailLines and TailBytes bound the output kept for the dead-letter
	// detail and the result record. Default 100 lines and 16 KiB.
	TailLines int
	TailBytes int
	// SnoozeDelay is how long a task that exits with ExitSnooze waits
	// before it is delivered again. Defaults to 1 minute.
	SnoozeDelay time.Duration
}

// defaultSnoozeDelay is Shell.SnoozeDelay's default.
const defaultSnoozeDelay = time.Minute

// NewShell returns a Shell with the current environment and the defaults.
func NewShell() *Shell {
	return &Shell{Env: os.Environ()}
}

// Check says why this machine cannot run shell tasks, nil when it can: a
// task runs with bash, which must be on PATH, in a process group of its
// own, which Windows does not have. A worker with a Shell refuses to run
// on Windows; without bash each task it claimed would fail.
func (s *Shell) Check() error {
	if shellUnsupported != nil {
		return shellUnsupported
	}
	if _, err := exec.LookPath("bash"); err != nil {
		return errors.New("the worker runs each task with bash, which is not on PATH: install bash or add its directory to PATH")
	}
	return nil
}

// Handle runs the task's command. It implements Handler.
func (s *Shell) Handle(ctx context.Context, job *Job) error {
	if shellUnsupported != nil {
		return shellUnsupported
	}
	if job.Task.DirSyncTo != "" {
		return s.runWithDirSync(ctx, job)
	}
	return s.run(ctx, job, nil)
}

// run runs the task's command with extraEnv added to its environment.
func (s *Shell) run(ctx context.Context, job *Job, extraEnv []string) error {
	t := job.Task
	if !t.IsShell() {
		// Retrying cannot give the task a command: dead-letter it at once,
		// as a Mux does a task it has no handler for.
		return Permanent(fmt.Errorf("task %s has no command (its kwargs are %s): the shell worker runs command tasks only; use a Go handler with worker.Run for payload tasks", t.ID, truncateStr(shownPayload(t.Payload), 200)))
	}
	killTimeout := s.KillTimeout
	if killTimeout <= 0 {
		killTimeout = 600 * time.Second
	}
	grace := s.OrphanGrace
	if grace <= 0 {
		grace = 3 * time.Second
	}
	var tail tailBuffer
	tail.init(orDefault(s.TailLines, 100), orDefault(s.TailBytes, 16<<10))
	var err error

	var cd *ckptDir
	if job.ckpt != nil {
		if cd, err = newCkptDir(job.ckpt); err != nil {
			return err
		}
		defer cd.remove()
		extraEnv = append(slices.Clip(extraEnv), CheckpointDirEnv+"="+cd.dir)
	}
	cmd, cleanup, err := s.command(t.Command)
	if err != nil {
		return err
	}
	defer cleanup()
	cmd.Env = append(s.environ(job), extraEnv...)
	cmd.Dir = t.Cwd
	cmd.SysProcAttr = groupAttr()
	dieWithWorker(cmd.SysProcAttr)

	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating the output pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("creating the output pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	waited := make(chan error, 1)
	if err := startAndWait(cmd, waited); err != nil {
		for _, f := range []*os.File{outR, outW, errR, errW} {
			f.Close()
		}
		return startError(err, t.Cwd)
	}
	// The child has its copies; ours must go so the readers see EOF.
	outW.Close()
	errW.Close()
	pgid := cmd.Process.Pid

	var readers sync.WaitGroup
	stream := func(r *os.File, name string) {
		defer readers.Done()
		defer r.Close()
		s.stream(r, name, "["+shortID(t.ID)+"] ", job.Log, &tail)
	}
	readers.Add(2)
	go stream(outR, "stdout")
	go stream(errR, "stderr")

	var beforeTerm func()
	if cd != nil {
		stopWatch := make(chan struct{})
		watched := make(chan struct{})
		go func() { defer close(watched); cd.watch(ctx, job.ckptEvery, stopWatch) }()
		defer func() { close(stopWatch); <-watched }()
		beforeTerm = func() { cd.saveIfChanged(ctx, "stopping: "+context.Cause(ctx).Error()) }
	}
	stopped, werr := awaitExit(ctx, job, procGroup{pgid: pgid, tty: s.EmulateTTY}, waited, killTimeout, beforeTerm)
	cd.saveAtEnd(ctx, stopped, werr)

	// The main process is gone; background processes may still hold the
	// pipes, which would block the readers forever.
	readDone := make(chan struct{})
	go func() { readers.Wait(); close(readDone) }()
	select {
	case <-readDone:
	case <-time.After(grace):
		job.Log.Warn("background processes of the task still hold its output open after it exited; killing its process group",
			"grace", grace, "pgid", pgid)
		_ = signalPID(-pgid, syscall.SIGKILL)
		select {
		case <-readDone:
		case <-time.After(2 * time.Second):
			// A process outside the group holds the pipe (it called
			// setsid); stop reading rather than hang.
			outR.Close()
			errR.Close()
			<-readDone
		}
	}

	if job.Envelope != nil {
		code, _ := exitStatus(werr)
		job.Envelope.SetResult(jobq.ResultDetails{ExitCode: code, Output: tail.String()})
	}
	// A stop that came only after the main process exited (while its
	// background processes held the output, say) does not change how the
	// task ended.
	res := outcome(ctx, stopped, werr, &tail, cmp.Or(s.SnoozeDelay, defaultSnoozeDelay))
	if res != nil && !stopped && ctx.Err() != nil {
		return endedBeforeStop{res}
	}
	return res
}

// startError says why the command could not start. Go reports a working
// directory it cannot enter as an error of the program ("fork/exec
// /usr/bin/bash: no such file or directory"), which would send the user
// looking for bash: when the task's cwd is the cause, it names the cwd.
func startError(err error, cwd string) error {
	if cwd != "" {
		if st, serr := os.Stat(cwd); serr != nil {
			return fmt.Errorf("the task's working directory (cwd) cannot be used: %w", serr)
		} else if !st.IsDir() {
			return fmt.Errorf("the task's working directory (cwd) cannot be used: %s: %w", cwd, syscall.ENOTDIR)
		}
	}
	return fmt.Errorf("starting bash: %w", err)
}

// startAndWait starts cmd and waits for it on a goroutine locked to one
// OS thread, so that the thread that started the child lives until the
// child has exited: Linux sends the parent-death signal (dieWithWorker)
// when that thread exits, not when the process does. The thread would sit
// in wait4 anyway. The wait's result goes to waited.
func startAndWait(cmd *exec.Cmd, waited chan<- error) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	return <-started
}

// awaitExit waits for the command's main process to exit (waited), and
// signals its process group meanwhile: SIGTERM when ctx ends (after
// beforeTerm, when not nil: the checkpoint's save), SIGKILL killTimeout
// later or when the job is killed. After a stop it also waits for the rest
// of the group — a child still saving its work after the main shell died of
// the SIGTERM, or one that ignores it — until the group is gone or gets its
// SIGKILL, so that nothing of the task runs on once it is requeued. It
// returns whether ctx ended before the main process exited (the process was
// stopped), and the wait's error.
func awaitExit(ctx context.Context, job *Job, g procGroup, waited <-chan error, killTimeout time.Duration, beforeTerm func()) (stopped bool, werr error) {
	pgid := g.pgid
	var killTimer, groupPoll <-chan time.Time
	ctxDone := ctx.Done()
	kill := job.Kill() // set to nil once used: a closed channel is always ready
	for {
		select {
		case err := <-waited:
			if !stopped || groupGone(pgid) {
				return stopped, err
			}
			// The group outlives its main process: poll it until it is
			// gone (only stopped tasks get here).
			werr, waited = err, nil
			poll := time.NewTicker(groupPollInterval)
			defer poll.Stop()
			groupPoll = poll.C
		case <-groupPoll:
			if groupGone(pgid) {
				return true, werr
			}
		case <-ctxDone:
			select {
			case err := <-waited:
				// It had exited already: the select picked the stop at
				// random among the two.
				return false, err
			default:
			}
			if errors.Is(signalPID(pgid, 0), syscall.ESRCH) {
				// Reaped already (pgid is its PID): its wait's result is
				// on its way.
				return false, <-waited
			}
			ctxDone, stopped = nil, true
			if beforeTerm != nil {
				beforeTerm()
			}
			job.Log.Info("stopping the task: SIGTERM to its process group", "why", context.Cause(ctx), "kill_timeout", killTimeout)
			g.signal(syscall.SIGTERM)
			killTimer = time.After(killTimeout)
		case <-killTimer:
			job.Log.Warn("task did not stop within the kill timeout: SIGKILL to its process group", "kill_timeout", killTimeout)
			g.signal(syscall.SIGKILL)
			if waited == nil {
				awaitKilled(job, pgid)
				return true, werr
			}
		case <-kill:
			kill = nil
			job.Log.Warn("killing the task: SIGKILL to its process group")
			g.signal(syscall.SIGKILL)
			if waited == nil {
				awaitKilled(job, pgid)
				return true, werr
			}
		}
	}
}

// procGroup is the process group a task runs in: pgid, its main process's
// PID; with tty, script(1)'s, whose child runs the command in a session and
// process group of its own.
type procGroup struct {
	pgid int
	tty  bool
}

// signal sends sig to the task's process group. Under script(1) it goes to
// the command's own group first: script answers a SIGTERM by killing the
// command 2 seconds later, which would cut the kill timeout short, and it
// exits with the command's status once the command has exited.
func (g procGroup) signal(sig syscall.Signal) {
	if g.tty {
		if child := ttyChild(g.pgid); child > 0 {
			_ = signalPID(-child, sig)
			if sig != syscall.SIGKILL {
				return
			}
		}
	}
	_ = signalPID(-g.pgid, sig)
}

// ttyChild is the PID of script(1)'s child, the session leader that runs the
// command under the pseudo-terminal; 0 when it cannot be told.
func ttyChild(script int) int {
	pid := strconv.Itoa(script)
	b, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	child, err := strconv.Atoi(first)
	if err != nil {
		return 0
	}
	return child
}

// groupPollInterval is how often awaitExit looks whether a stopped task's
// process group is gone once its main process has exited.
const groupPollInterval = 50 * time.Millisecond

// killWait is how long a process group that got SIGKILL has to be gone:
// the kernel ends its processes as they next run, which is at once unless
// one sleeps uninterruptibly (on a hung disk or network mount, say).
const killWait = 5 * time.Second

// awaitKilled waits until the process group pgid, which got SIGKILL, is
// gone, so that the task is not settled while a process of it still runs;
// after killWait it logs what is left and returns.
func awaitKilled(job *Job, pgid int) {
	deadline := time.Now().Add(killWait)
	for !groupGone(pgid) {
		if time.Now().After(deadline) {
			job.Log.Warn("processes of the task still run after SIGKILL (uninterruptible sleep?); settling the task anyway", "pgid", pgid, "waited", killWait)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// groupGone reports whether no process is left in the process group pgid,
// zombies aside: a child whose parent does not reap it (the worker running
// as PID 1 in a container inherits the task's orphans) has ended all the
// same. Processes are looked up in /proc only while the group answers a
// signal; where there is no /proc the group counts as present.
func groupGone(pgid int) bool {
	if errors.Is(signalPID(-pgid, 0), syscall.ESRCH) {
		return true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if live, inGroup := statInGroup(string(b), pgid); inGroup && live {
			return false
		}
	}
	return true
}

// statInGroup reads /proc/PID/stat: whether the process is in process group
// pgid, and whether it is live (not a zombie).
func statInGroup(stat string, pgid int) (live, inGroup bool) {
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return false, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 3 {
		return false, false
	}
	return f[0] != "Z" && f[0] != "X", f[2] == strconv.Itoa(pgid)
}

// outcome is the handler's result for a command that exited with werr:
// nil for status 0, a snooze of snoozeDelay for ExitSnooze, a TaskError
// with the output's tail otherwise, whose
// reason is the stop's cause when ctx ended before the command exited
// (stopped: a lost lease, the worker stopping, the time limit, a cancel).
func outcome(ctx context.Context, stopped bool, werr error, tail *tailBuffer, snoozeDelay time.Duration) error {
	code, signal := exitStatus(werr)
	if stopped {
		return &TaskError{Err: fmt.Errorf("task stopped: %w", context.Cause(ctx)), Detail: tail.String(), ExitCode: code}
	}
	switch {
	case werr == nil:
		return nil
	case signal != nil:
		return &TaskError{Err: fmt.Errorf("command killed by signal %v", signal), Detail: tail.String(), ExitCode: signalExitCode(signal)}
	case code != nil && *code == ExitSnooze:
		return &snoozeError{delay: snoozeDelay, exitCode: code}
	case code != nil:
		return &TaskError{Err: fmt.Errorf("command exited with status %d", *code), Detail: tail.String(), ExitCode: code}
	}
	return &TaskError{Err: fmt.Errorf("running the command: %w", werr), Detail: tail.String()}
}

// signalExitCode is the status a shell reports for a command killed by
// sig, 128 + its number (137 for SIGKILL, which the OOM killer sends): the
// same whether bash ran the command as its child or exec'd it, so that
// requeue --exit-code 137 finds every such kill.
func signalExitCode(sig os.Signal) *int {
	n, ok := sig.(syscall.Signal)
	if !ok {
		return nil
	}
	code := 128 + int(n)
	return &code
}

// exitStatus is how the command's main process ended, from its wait's
// error: its exit status when it exited (0 for nil), or the signal that
// killed it; neither when it could not be waited for.
func exitStatus(werr error) (code *int, signal os.Signal) {
	if werr == nil {
		zero := 0
		return &zero, nil
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		return nil, nil
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, ws.Signal()
	}
	c := ee.ExitCode()
	return &c, nil
}

// maxInlineCommand is the longest command passed to bash -c as an argument.
// Linux refuses a single argument over 128 KiB (MAX_ARG_STRLEN), and tasks
// fetched from a stash are exactly the large ones, so longer commands go
// through a temporary script file instead.
const maxInlineCommand = 64 << 10

// command builds the process: bash -c, or bash -c under script(1) for a
// pseudo-terminal; a command longer than maxInlineCommand is written to a
// temporary file that bash runs and cleanup removes.
func (s *Shell) command(command string) (cmd *exec.Cmd, cleanup func(), err error) {
	cleanup = func() {}
	script := command
	if len(command) > maxInlineCommand {
		f, err := os.CreateTemp("", "jobq-task-*.sh")
		if err != nil {
			return nil, cleanup, fmt.Errorf("writing the long command to a script file: %w", err)
		}
		cleanup = func() { os.Remove(f.Name()) }
		_, werr := f.WriteString(command)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			cleanup()
			return nil, func() {}, fmt.Errorf("writing the long command to a script file: %w", werr)
		}
		script = "exec bash " + shellword.Quote(f.Name())
	}
	if s.EmulateTTY {
		// script runs its -c argument with $SHELL -c; -e returns the
		// command's exit status, -q drops script's own banner, -f flushes.
		return exec.Command("script", "-qefc", script, "/dev/null"), cleanup, nil
	}
	bash, err := bashPath()
	if err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("finding bash to run the task: %w", err)
	}
	return exec.Command(bash, "-c", script), cleanup, nil
}

// bashPath looks bash up in PATH once per process rather than once per task
// (the lookup stats every PATH entry, which is costly on short tasks).
var bashPath = sync.OnceValues(func() (string, error) { return exec.LookPath("bash") })

// environ builds a fresh environment for one task: the base environment
// without the withheld variables (TaskEnv), then the task's variables in
// order, then JOBQ_TASK_ID and JOBQ_QUEUE_NAME.
// Later entries override earlier ones of the same name (os/exec keeps the
// last), so nothing is shared between tasks.
func (s *Shell) environ(job *Job) []string {
	base := s.Env
	if base == nil {
		base = os.Environ()
	}
	env := TaskEnv(base, s.PassEnv)
	if s.EmulateTTY {
		env = append(env, "SHELL=/bin/bash")
	}
	for _, e := range job.Task.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	return append(env, "JOBQ_TASK_ID="+job.Task.ID, "JOBQ_QUEUE_NAME="+job.QueueName)
}

// maxLogLine is the longest output line logged as one: a longer one is
// logged in parts of about this size.
const maxLogLine = 1 << 20

// stream logs r line by line with the task's prefix and keeps the tail.
func (s *Shell) stream(r io.Reader, name, prefix string, log *slog.Logger, tail *tailBuffer) {
	br := bufio.NewReaderSize(r, 8<<10) // longer lines arrive in parts and are joined below
	var long []byte
	split := false // a part of a longer line was logged: its end may read as an empty line
	for {
		chunk, isPrefix, err := br.ReadLine()
		if split && len(long) == 0 && len(chunk) == 0 && !isPrefix && err == nil {
			split = false // the end of the line just logged, not an empty line
			continue
		}
		if len(chunk) > 0 || (err == nil && !isPrefix) {
			if isPrefix && len(long)+len(chunk) < maxLogLine {
				long = append(long, chunk...)
				split = false // what follows is this part's, not a line's end
				continue
			}
			split = isPrefix
			line := string(append(long, chunk...))
			long = long[:0]
			line = strings.TrimSuffix(line, "\r")
			tail.add(line)
			if name == "stderr" {
				log.Info(prefix+line, "stream", name)
			} else {
				log.Info(prefix + line)
			}
		}
		if err != nil {
			if len(long) > 0 {
				tail.add(string(long))
				log.Info(prefix+string(long), "stream", name)
			}
			return
		}
	}
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

func truncateStr(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// shortID is the start of a task ID, enough to tell tasks apart in a log.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
