package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, line string
		want       procStat
		ok         bool
	}{
		{"plain", "42 (sleep) S 7 42 42 0 -1 4194304 100 0 0 0 15 5 0 0 20 0 1 0 100 5000000 250 18446744073709551615",
			procStat{pid: 42, ppid: 7, ticks: 20, rssPages: 250}, true},
		{"command with spaces and parentheses", "43 (a (b) c) R 1 43 43 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 100 1 9 0",
			procStat{pid: 43, ppid: 1, ticks: 7, rssPages: 9}, true},
		{"truncated", "44 (x) S 1 2 3", procStat{}, false},
		{"no command", "garbage", procStat{}, false},
		{"no process ID", "x (y) S 1 43 43 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 100 1 9 0", procStat{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseStat([]byte(tc.line))
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestReadUsageSeesThisProcess(t *testing.T) {
	t.Parallel()
	if u := readUsage(); u.rss <= 0 || u.at.IsZero() {
		t.Errorf("readUsage() = %+v; want this process's resident memory", u)
	}
}

// pids returns the process IDs of stats, sorted.
func pids(stats []procStat) []int {
	out := make([]int, 0, len(stats))
	for _, s := range stats {
		out = append(out, s.pid)
	}
	slices.Sort(out)
	return out
}

// TestDescendantsFindsGrandchildren starts a shell that starts a sleep (a
// grandchild of the test) and checks that both ways of walking the real
// /proc find the two.
func TestDescendantsFindsGrandchildren(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "sleep 30 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	var line [32]byte
	n, err := out.Read(line[:])
	if err != nil {
		t.Fatal(err)
	}
	sleep, err := strconv.Atoi(string(line[:n-1]))
	if err != nil {
		t.Fatalf("the shell printed %q, not the sleep's process ID", line[:n])
	}
	defer func() { _ = exec.Command("kill", strconv.Itoa(sleep)).Run() }()

	tree := procTree{root: "/proc"}
	self := os.Getpid()
	walks := []struct {
		name  string
		stats []procStat
	}{{"reading every process", tree.walkAll(self)}}
	if byChildren, ok := tree.walkChildren(self); ok {
		walks = append(walks, struct {
			name  string
			stats []procStat
		}{"through the children files", byChildren})
	} else {
		t.Log("this kernel lists no children in /proc/PID/task/TID/children; only the walk through every process ran")
	}
	// Other processes may start or end between the walks, so each is
	// checked for the three, not compared with the other.
	for _, w := range walks {
		got := pids(w.stats)
		for _, want := range []int{self, cmd.Process.Pid, sleep} {
			if !slices.Contains(got, want) {
				t.Errorf("%s: descendants %v lack %d (test %d, shell %d, sleep %d)", w.name, got, want, self, cmd.Process.Pid, sleep)
			}
		}
	}
}

// TestDescendantsOfAFakeTree walks a /proc of files, with and without the
// children files, where the two disagree: the children files are used when
// the kernel has them.
func TestDescendantsOfAFakeTree(t *testing.T) {
	t.Parallel()
	stat := func(pid, ppid int) string {
		return strconv.Itoa(pid) + " (p) S " + strconv.Itoa(ppid) + " 0 0 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 100 1 3 0"
	}
	for _, tc := range []struct {
		name     string
		children map[int]string // thread (= process) ID to its children file; nil: the kernel has none
		want     []int
	}{
		// 13 names 10 as its parent, but no children file lists it: a walk
		// through the children files leaves it out, the full walk does not.
		{"children files", map[int]string{10: "11 ", 11: "12", 12: "", 13: ""}, []int{10, 11, 12}},
		{"no children files", nil, []int{10, 11, 12, 13}},
		{"a listed child that has exited", map[int]string{10: "11 99", 11: "12", 12: "", 13: ""}, []int{10, 11, 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for pid, ppid := range map[int]int{10: 1, 11: 10, 12: 11, 13: 10, 20: 1} {
				dir := filepath.Join(root, strconv.Itoa(pid))
				task := filepath.Join(dir, "task", strconv.Itoa(pid))
				if err := os.MkdirAll(task, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat(pid, ppid)), 0o644); err != nil {
					t.Fatal(err)
				}
				if c, ok := tc.children[pid]; ok {
					if err := os.WriteFile(filepath.Join(task, "children"), []byte(c), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := pids(procTree{root: root}.descendants(10)); !slices.Equal(got, tc.want) {
				t.Errorf("descendants(10) = %v; want %v", got, tc.want)
			}
		})
	}
}

// BenchmarkReadUsage reads this process's tree both ways, on this host as
// it is; processes-on-host says how many processes the full walk read.
// Start many processes elsewhere to see each way scale, e.g.:
//
//	for i in $(seq 2000); do sleep 600 & done
//	go test -run '^$' -bench ReadUsage ./worker/
func BenchmarkReadUsage(b *testing.B) {
	tree := procTree{root: "/proc"}
	self := os.Getpid()
	procs := float64(len(tree.all()))
	b.Run("children-files", func(b *testing.B) {
		if _, ok := tree.walkChildren(self); !ok {
			b.Skip("this kernel has no children files")
		}
		for b.Loop() {
			tree.walkChildren(self)
		}
		b.ReportMetric(procs, "processes-on-host")
	})
	b.Run("every-process", func(b *testing.B) {
		for b.Loop() {
			tree.walkAll(self)
		}
		b.ReportMetric(procs, "processes-on-host")
	})
}
