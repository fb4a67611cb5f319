package worker

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100
// on every Linux platform Go supports).
const clockTick = 10 * time.Millisecond

// usage is the CPU time and resident memory of this process and the
// processes it started (a shell task's command and its children).
type usage struct {
	at  time.Time
	cpu time.Duration
	rss int64
}

// readUsage sums, from /proc, the CPU time and resident memory of this
// process and its live descendants, and adds the CPU time of the children
// it has already waited for (getrusage). On error it returns what it has.
func readUsage() usage {
	u := usage{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		u.cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	procs := readProcs()
	self := os.Getpid()
	page := int64(os.Getpagesize())
	// Walk the tree from this process down.
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	todo := []int{self}
	seen := map[int]bool{}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if p, ok := procs[pid]; ok {
			u.cpu += time.Duration(p.ticks) * clockTick
			u.rss += p.rssPages * page
		}
		todo = append(todo, children[pid]...)
	}
	return u
}

// procStat is what readUsage needs from /proc/PID/stat.
type procStat struct {
	ppid     int
	ticks    int64 // utime + stime
	rssPages int64
}

// readProcs reads /proc/PID/stat of every process.
func readProcs() map[int]procStat {
	out := map[int]procStat{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if p, ok := parseStat(b); ok {
			out[pid] = p
		}
	}
	return out
}

// parseStat reads a /proc/PID/stat line (proc(5)): the fields after the
// command name, which is in parentheses and may hold spaces.
func parseStat(b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15, rss 24.
	if len(f) < 22 {
		return procStat{}, false
	}
	num := func(k int) int64 {
		n, _ := strconv.ParseInt(string(f[k-3]), 10, 64)
		return n
	}
	return procStat{ppid: int(num(4)), ticks: num(14) + num(15), rssPages: num(24)}, true
}
