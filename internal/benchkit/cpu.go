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
}

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
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // the process ended
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split at
		// the last parenthesis; utime and stime are fields 14 and 15.
		s := string(stat)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open || !isServer(s[open+1:closing]) {
			continue
		}
		f := strings.Fields(s[closing+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
		seen = true
	}
	// Linux reports these in clock ticks of 1/100 s (USER_HZ).
	return time.Duration(ticks) * 10 * time.Millisecond, seen
}

func isServer(comm string) bool {
	for _, n := range serverNames {
		if strings.HasPrefix(comm, n) {
			return true
		}
	}
	return false
}
