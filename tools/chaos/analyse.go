package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// kill is one SIGKILL the harness sent.
type kill struct {
	pid     int
	at      time.Time
	running int // the worker's child processes (running tasks) at the kill
}

// span is an engine restart: from the restart command's start to its end.
type span struct{ from, to time.Time }

// killReport is one kill in the result.
type killReport struct {
	Pid     int `json:"pid"`
	Running int `json:"running"`
	// Orphans counts the killed worker's tasks that ran on and finished
	// after the worker died.
	Orphans    int `json:"orphans_finished"`
	Duplicates int `json:"duplicates"`
}

// The causes a duplicate or a redelivery is put down to.
const (
	// causeRunning: the task was running when its worker was killed.
	causeRunning = "running_at_kill"
	// causeUnsettled: the task had finished on the killed worker, whose
	// settlement had not reached the engine.
	causeUnsettled = "finished_unsettled"
	// causeClaimed: the task was redelivered without having started on a
	// killed worker: claimed ahead (prefetched) or waiting for a handler.
	causeClaimed = "claimed_not_started"
	// causeRestart: the repeated run ended in the second before an
	// engine restart or during it (a settlement the restart undid or
	// refused).
	causeRestart = "engine_restart"
	// causeOther: neither a kill nor a restart explains it (a lease that
	// expired).
	causeOther = "other"
)

// rec is one line of the run file: which worker, when.
type rec struct {
	pid int
	t   float64 // Unix seconds
}

// runFile is the run file read back: start and end records per task.
type runFile struct {
	starts, ends map[int][]rec
	runs         int // end records
}

// readRuns reads the run file ("s|e TASK WORKER-PID UNIX-TIME" lines).
func readRuns(path string) (runFile, error) {
	rf := runFile{starts: map[int][]rec{}, ends: map[int][]rec{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return rf, nil
	}
	if err != nil {
		return rf, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue
		}
		n, err1 := strconv.Atoi(fs[1])
		pid, err2 := strconv.Atoi(fs[2])
		t, err3 := strconv.ParseFloat(fs[3], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		switch fs[0] {
		case "s":
			rf.starts[n] = append(rf.starts[n], rec{pid, t})
		case "e":
			rf.ends[n] = append(rf.ends[n], rec{pid, t})
			rf.runs++
		}
	}
	return rf, sc.Err()
}

// taskStarted matches a worker's "task started" log line for a chaos task.
var taskStarted = regexp.MustCompile(`msg="task started" .*delivery=(\d+) what="n=(\d+);`)

// readWorkerLogs returns, per task, the highest delivery count a worker
// logged when it started the task.
func readWorkerLogs(dir string) (map[int]int, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "worker-*.log"))
	if err != nil {
		return nil, err
	}
	deliveries := map[int]int{}
	for _, l := range logs {
		f, err := os.Open(l)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m := taskStarted.FindSubmatch(sc.Bytes())
			if m == nil {
				continue
			}
			d, _ := strconv.Atoi(string(m[1]))
			n, _ := strconv.Atoi(string(m[2]))
			deliveries[n] = max(deliveries[n], d)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return deliveries, nil
}

// analyse fills in the counts: lost tasks, duplicate runs and what each
// duplicate and redelivery is put down to, per kill.
//
// For each killed worker K, killed at time tk, a task is "running at the
// kill" when K started it before tk and had not ended it by tk, and
// "finished, unsettled" when K ended it before tk and yet it was delivered
// again. A duplicate (a second end record) is put down to the killed
// worker whose run it repeats.
func analyse(res *result, tasks int, rf runFile, deliveries map[int]int, kills []kill, restarts []span) {
	res.Kills = len(kills)
	res.Runs = rf.runs
	countLost(res, tasks, rf)
	res.Duplicates = rf.runs - len(rf.ends)
	res.DupCauses = map[string]int{}
	res.Redelivered = map[string]int{}
	a := newAttribution(rf, kills, restarts)
	res.KillLog = a.killLog()
	a.adoptOrphans()
	a.countOrphans(res.KillLog)
	a.attributeDuplicates(res)
	a.attributeRedeliveries(res, tasks, deliveries)
	summariseKills(res)
}

// countLost counts the tasks that never ended, listing the first 20.
func countLost(res *result, tasks int, rf runFile) {
	for n := range tasks {
		if len(rf.ends[n]) == 0 {
			res.Lost++
			if len(res.LostTasks) < 20 {
				res.LostTasks = append(res.LostTasks, n)
			}
		}
	}
}

// summariseKills sets the duplicates per kill, on average and at most.
func summariseKills(res *result) {
	byKills := 0
	for _, k := range res.KillLog {
		res.MaxPerKill = max(res.MaxPerKill, k.Duplicates)
		byKills += k.Duplicates
	}
	if res.Kills > 0 {
		res.PerKill = float64(byKills) / float64(res.Kills)
	}
}

// unixSeconds is t as Unix seconds, as the run file records times.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// attribution puts runs and deliveries down to the kills and engine
// restarts that explain them.
type attribution struct {
	rf       runFile
	kills    []kill
	byPid    map[int]int // killed worker's pid -> its index in kills
	restarts []span
}

func newAttribution(rf runFile, kills []kill, restarts []span) *attribution {
	a := &attribution{rf: rf, kills: kills, byPid: map[int]int{}, restarts: restarts}
	for i, k := range kills {
		a.byPid[k.pid] = i
	}
	return a
}

// killLog is one empty report per kill, in kill order.
func (a *attribution) killLog() []killReport {
	log := make([]killReport, len(a.kills))
	for i, k := range a.kills {
		log[i] = killReport{Pid: k.pid, Running: k.running}
	}
	return log
}

// killedAt reports when the worker pid was killed and the kill's index,
// or false when it was not killed.
func (a *attribution) killedAt(pid int) (float64, int, bool) {
	i, ok := a.byPid[pid]
	if !ok {
		return 0, 0, false
	}
	return unixSeconds(a.kills[i].at), i, true
}

// adopt gives each record made under init (pid 1) to the last kill before
// it: a task whose bash started after its worker died reads its parent as
// init.
func (a *attribution) adopt(rs []rec) {
	for j, r := range rs {
		if r.pid != 1 {
			continue
		}
		for _, k := range a.kills {
			if unixSeconds(k.at) <= r.t {
				rs[j].pid = k.pid
			}
		}
	}
}

// adoptOrphans adopts the start and end records of every started task.
func (a *attribution) adoptOrphans() {
	for n := range a.rf.starts {
		a.adopt(a.rf.starts[n])
		a.adopt(a.rf.ends[n])
	}
}

// countOrphans counts, per kill, the end records its worker made after
// its kill.
func (a *attribution) countOrphans(log []killReport) {
	for _, ends := range a.rf.ends {
		for _, e := range ends {
			if tk, i, ok := a.killedAt(e.pid); ok && e.t >= tk {
				log[i].Orphans++
			}
		}
	}
}

// duringRestart reports whether a run that ended at t may have had its
// settlement undone or refused by an engine restart.
func (a *attribution) duringRestart(t float64) bool {
	for _, r := range a.restarts {
		if unixSeconds(r.from)-1 <= t && t <= unixSeconds(r.to) {
			return true
		}
	}
	return false
}

// endCause puts a repeated run of task n that ended at t on pid down to a
// kill (with the kill's index, else -1): it ran on past its worker's
// death, or it had finished before and its settlement was lost with the
// worker — unless it ended just before an engine restart, or the task was
// delivered again while that worker still lived, which no kill explains.
func (a *attribution) endCause(n, pid int, t float64) (string, int) {
	tk, i, ok := a.killedAt(pid)
	switch {
	case ok && t >= tk:
		return causeRunning, i
	case a.duringRestart(t):
		// The restart undid or refused the settlement before the kill
		// came.
		return causeRestart, -1
	case ok && !slices.ContainsFunc(a.rf.starts[n], func(s rec) bool { return s.t > t && s.t < tk }):
		return causeUnsettled, i
	}
	return causeOther, -1
}

// startCause puts a delivery of task n that started at t on pid, and was
// delivered again after, down to its cause: that of its end when it
// ended, else the kill it died in.
func (a *attribution) startCause(n, pid int, t float64) string {
	for _, e := range a.rf.ends[n] {
		if e.pid == pid && e.t >= t {
			c, _ := a.endCause(n, pid, e.t)
			return c
		}
	}
	if _, _, ok := a.killedAt(pid); ok {
		return causeRunning
	}
	return causeOther
}

// keptEnd picks, among a task's end records sorted by time, the one that
// is not a duplicate: the last by a worker that was not killed (its
// settlement took the task off the queue), else the last.
func (a *attribution) keptEnd(ends []rec) int {
	for j := len(ends) - 1; j >= 0; j-- {
		if _, _, killed := a.killedAt(ends[j].pid); !killed {
			return j
		}
	}
	return len(ends) - 1
}

// attributeDuplicates puts every end record but the kept one down to its
// cause and kill.
func (a *attribution) attributeDuplicates(res *result) {
	for n, ends := range a.rf.ends {
		if len(ends) < 2 {
			continue
		}
		ends = slices.Clone(ends)
		slices.SortFunc(ends, func(x, y rec) int { return cmp.Compare(x.t, y.t) })
		keep := a.keptEnd(ends)
		for j, e := range ends {
			if j == keep {
				continue
			}
			c, i := a.endCause(n, e.pid, e.t)
			res.DupCauses[c]++
			if i >= 0 {
				res.KillLog[i].Duplicates++
			}
		}
	}
}

// attributeRedeliveries counts the tasks delivered more than once by
// cause.
func (a *attribution) attributeRedeliveries(res *result, tasks int, deliveries map[int]int) {
	for n := range tasks {
		if deliveries[n] < 2 && len(a.rf.starts[n]) < 2 {
			continue
		}
		res.Redelivered[a.redeliveryCause(n)]++
	}
}

// redeliveryCause is the cause of the earliest explained delivery of task
// n before its last start; when none is explained, a claim lost with a
// killed worker if there were kills, else other.
func (a *attribution) redeliveryCause(n int) string {
	starts := slices.Clone(a.rf.starts[n])
	slices.SortFunc(starts, func(x, y rec) int { return cmp.Compare(x.t, y.t) })
	for _, s := range starts[:max(len(starts)-1, 0)] {
		if sc := a.startCause(n, s.pid, s.t); sc != causeOther {
			return sc
		}
	}
	if len(a.kills) > 0 {
		return causeClaimed
	}
	return causeOther
}

// killFile is where the harness records its kills in the work directory,
// so that -analyse can read a kept run again.
const killFile = "kills.json"

// saveKills writes the kills as JSON lines (pid, Unix nanoseconds, running).
func saveKills(dir string, kills []kill) error {
	var b strings.Builder
	for _, k := range kills {
		fmt.Fprintf(&b, "[%d,%d,%d]\n", k.pid, k.at.UnixNano(), k.running)
	}
	return os.WriteFile(filepath.Join(dir, killFile), []byte(b.String()), 0o644)
}

// restartFile records the engine restarts, as [from, to] Unix nanoseconds
// a line.
const restartFile = "restarts.json"

// saveRestarts writes the restarts for -analyse.
func saveRestarts(dir string, restarts []span) error {
	var b strings.Builder
	for _, r := range restarts {
		fmt.Fprintf(&b, "[%d,%d]\n", r.from.UnixNano(), r.to.UnixNano())
	}
	return os.WriteFile(filepath.Join(dir, restartFile), []byte(b.String()), 0o644)
}

// loadRestarts reads what saveRestarts wrote; none when the file is
// missing.
func loadRestarts(dir string) ([]span, error) {
	b, err := os.ReadFile(filepath.Join(dir, restartFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs []span
	for _, line := range strings.Fields(string(b)) {
		var v [2]int64
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return nil, fmt.Errorf("%s: %w", restartFile, err)
		}
		rs = append(rs, span{time.Unix(0, v[0]), time.Unix(0, v[1])})
	}
	return rs, nil
}

// loadKills reads what saveKills wrote.
func loadKills(dir string) ([]kill, error) {
	b, err := os.ReadFile(filepath.Join(dir, killFile))
	if err != nil {
		return nil, err
	}
	var kills []kill
	for _, line := range strings.Fields(string(b)) {
		var v [3]int64
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return nil, fmt.Errorf("%s: %w", killFile, err)
		}
		kills = append(kills, kill{pid: int(v[0]), at: time.Unix(0, v[1]), running: int(v[2])})
	}
	return kills, nil
}

// reanalyse reads a kept work directory again.
func reanalyse(dir string, tasks int) (result, error) {
	res := result{Tasks: tasks}
	rf, err := readRuns(filepath.Join(dir, "runs"))
	if err != nil {
		return res, err
	}
	deliveries, err := readWorkerLogs(dir)
	if err != nil {
		return res, err
	}
	kills, err := loadKills(dir)
	if err != nil {
		return res, err
	}
	restarts, err := loadRestarts(dir)
	if err != nil {
		return res, err
	}
	analyse(&res, tasks, rf, deliveries, kills, restarts)
	return res, nil
}
