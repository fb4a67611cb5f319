package benchkit

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serverNames are the processes whose CPU time counts as the engine's.
var serverNames = []string{"redis-server", "postgres"}

// CPUMark is a reading of CPU time used so far: by this process, and by the
// engine's server processes on this machine.
type CPUMark struct {
	self, server time.Duration
	serverSeen   bool
	own          time.Duration
	ownSeen      bool
}

// OwnServerCPU, when set, reads the CPU time used so far by the server
// processes that serve this benchmark's own connections, leaving out the
// server's other clients (on a machine where other programs use the same
// server, "server-µs/task" counts their work too). A benchmark sets it
// before it starts the timer and clears it after; MarkCPU then also
// reports "own-server-µs/task".
var OwnServerCPU func() (time.Duration, bool)

// MarkCPU reads the CPU time used so far. The two cores of a development
// machine are shared by the benchmark process and the engine, so a change
// that speeds up one side shows as CPU time per task before it shows as
// throughput.
func MarkCPU() CPUMark {
	var m CPUMark
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		m.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m.server, m.serverSeen = serverCPU()
	if OwnServerCPU != nil {
		m.own, m.ownSeen = OwnServerCPU()
	}
	return m
}

// Report reports the CPU time per task since m: "client-µs/task" for this
// process and, when an engine's server runs on this machine,
// "server-µs/task" for its processes (all of them, whoever they serve).
func (m CPUMark) Report(b *testing.B, tasks int) {
	now := MarkCPU()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(tasks) }
	b.ReportMetric(per(now.self-m.self), "client-µs/task")
	if m.serverSeen && now.serverSeen {
		b.ReportMetric(per(now.server-m.server), "server-µs/task")
	}
	if m.ownSeen && now.ownSeen {
		b.ReportMetric(per(now.own-m.own), "own-server-µs/task")
	}
}

// serverCPU sums the user and system time of the processes named in
// serverNames, from /proc (so Linux only; elsewhere it reports none).
func serverCPU() (time.Duration, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks int64
	seen := false
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		comm, t, ok := procCPU(e.Name())
		if !ok || !isServer(comm) {
			continue
		}
		ticks += t
		seen = true
	}
	return ticksToDuration(ticks), seen
}

// ProcessCPU sums the user and system time of the processes pids, from
// /proc (Linux only); it reports false when it can read none of them.
func ProcessCPU(pids []int) (time.Duration, bool) {
	var ticks int64
	seen := false
	for _, pid := range pids {
		if _, t, ok := procCPU(strconv.Itoa(pid)); ok {
			ticks += t
			seen = true
		}
	}
	return ticksToDuration(ticks), seen
}

// procCPU reads a process's command name and user plus system clock ticks.
func procCPU(pid string) (comm string, ticks int64, ok bool) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0, false // the process ended
	}
	// pid (comm) state ppid ...: comm may hold spaces, so split at
	// the last parenthesis; utime and stime are fields 14 and 15.
	s := string(stat)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return "", 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return s[open+1 : closing], u + st, true
}

// ticksToDuration converts clock ticks, which Linux reports in 1/100 s
// (USER_HZ).
func ticksToDuration(ticks int64) time.Duration { return time.Duration(ticks) * 10 * time.Millisecond }

func isServer(comm string) bool {
	for _, n := range serverNames {
		if strings.HasPrefix(comm, n) {
			return true
		}
	}
	return false
}
