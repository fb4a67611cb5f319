package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// usage is the process's CPU time and I/O counters at one moment, to give
// a drain phase's cost per task: the engine (SQLite) runs in the process,
// so for it that is the queue's cost.
type usage struct {
	cpu           time.Duration // user and system
	rchar, wchar  int64         // bytes read and written by system calls (/proc/self/io; 0 when unavailable)
	profile       *os.File      // the phase's CPU profile, when one is taken
	profileFailed error
}

// phaseStart reads the usage now and, when prefix is set, starts a CPU
// profile written to prefix-name.pprof.
func phaseStart(prefix, name string) usage {
	var u usage
	if prefix != "" {
		u.profile, u.profileFailed = startProfile(prefix + "-" + name + ".pprof")
	}
	u.cpu, u.rchar, u.wchar = readUsage()
	return u
}

// startProfile starts a CPU profile written to path.
func startProfile(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// end stops the phase's profile and reports its cost per task over n tasks.
func (u usage) end(n int64) string {
	cpu, rchar, wchar := readUsage()
	if u.profile != nil {
		pprof.StopCPUProfile()
		_ = u.profile.Close()
	}
	s := fmt.Sprintf("CPU %.1f µs per task", float64((cpu-u.cpu).Microseconds())/float64(n))
	if wchar > 0 {
		s += fmt.Sprintf(", %.1f KB written and %.1f KB read per task", float64(wchar-u.wchar)/1e3/float64(n), float64(rchar-u.rchar)/1e3/float64(n))
	}
	if u.profileFailed != nil {
		s += fmt.Sprintf(" (no CPU profile: %v)", u.profileFailed)
	}
	return s
}

// readUsage is the process's CPU time so far and its read and written
// bytes from /proc/self/io (0 where that file is missing).
func readUsage() (cpu time.Duration, rchar, wchar int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return cpu, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "rchar":
			rchar = n
		case "wchar":
			wchar = n
		}
	}
	return cpu, rchar, wchar
}
