package main

import (
	"bufio"
	"errors"
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
	// causeOther: no kill explains it (an engine restart, a lease that
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
func analyse(res *result, tasks int, rf runFile, deliveries map[int]int, kills []kill) {
	res.Kills = len(kills)
	res.Runs = rf.runs
	for n := range tasks {
		if len(rf.ends[n]) == 0 {
			res.Lost++
			if len(res.LostTasks) < 20 {
				res.LostTasks = append(res.LostTasks, n)
			}
		}
	}
	res.Duplicates = rf.runs - len(rf.ends)
	res.DupCauses = map[string]int{}
	res.Redelivered = map[string]int{}
	byPid := map[int]int{}
	res.KillLog = make([]killReport, len(kills))
	for i, k := range kills {
		byPid[k.pid] = i
		res.KillLog[i] = killReport{Pid: k.pid, Running: k.running}
	}
	killedAt := func(pid int) (float64, int, bool) {
		i, ok := byPid[pid]
		if !ok {
			return 0, 0, false
		}
		return float64(kills[i].at.UnixNano()) / 1e9, i, true
	}
	// Orphans: end records by a killed worker after its kill.
	for _, ends := range rf.ends {
		for _, e := range ends {
			if tk, i, ok := killedAt(e.pid); ok && e.t >= tk {
				res.KillLog[i].Orphans++
			}
		}
	}
	for _, ends := range rf.ends {
		if len(ends) < 2 {
			continue
		}
		cause, who := causeOther, -1
		for _, e := range ends {
			tk, i, ok := killedAt(e.pid)
			if !ok {
				continue
			}
			who = i
			if e.t >= tk {
				cause = causeRunning
				break
			}
			cause = causeUnsettled
		}
		extra := len(ends) - 1
		res.DupCauses[cause] += extra
		if who >= 0 {
			res.KillLog[who].Duplicates += extra
		}
	}
	for n := range tasks {
		if deliveries[n] < 2 && len(rf.starts[n]) < 2 {
			continue
		}
		cause := causeOther
		if len(kills) > 0 {
			cause = causeClaimed
		}
		for _, s := range rf.starts[n] {
			tk, _, ok := killedAt(s.pid)
			if !ok || s.t >= tk {
				continue
			}
			cause = causeRunning
			if slices.ContainsFunc(rf.ends[n], func(e rec) bool { return e.pid == s.pid && e.t < tk }) {
				cause = causeUnsettled
			}
		}
		res.Redelivered[cause]++
	}
	for _, k := range res.KillLog {
		res.MaxPerKill = max(res.MaxPerKill, k.Duplicates)
	}
	if len(kills) > 0 {
		res.PerKill = float64(res.Duplicates) / float64(len(kills))
	}
}
