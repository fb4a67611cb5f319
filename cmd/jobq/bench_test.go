package main_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The benchmarks run the built binary, like the end-to-end tests, and
// report memory and per-task overhead as custom metrics. Run them with
// -benchtime=1x: each iteration is a whole scenario.
//
//	go test -run '^$' -bench . -benchtime=1x ./cmd/jobq

// BenchmarkPushStdinMillionLines pushes 1,000,000 lines from standard input
// and reports the push process's peak RSS.
func BenchmarkPushStdinMillionLines(b *testing.B) {
	const lines = 1_000_000
	input := filepath.Join(b.TempDir(), "tasks.txt")
	f, err := os.Create(input)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range lines {
		fmt.Fprintf(w, "echo task %d\n", i)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	for b.Loop() {
		bn := newBenchDir(b)
		in, err := os.Open(input)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(jobqBin, bn.queue, "push", "-q")
		cmd.Stdin = in
		cmd.Env = bn.env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		elapsed := time.Since(start)
		in.Close()
		if err != nil {
			b.Fatalf("push: %v\n%s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		b.ReportMetric(float64(ru.Maxrss)/1024, "MiB-peak-RSS")
		b.ReportMetric(float64(lines)/elapsed.Seconds(), "tasks/s")
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		b.ReportMetric(cpu.Seconds(), "s-cpu")
	}
}

// BenchmarkIdleWorkerRSS starts a worker with --wait on an empty queue and
// reports its RSS after it has idled for a few seconds.
func BenchmarkIdleWorkerRSS(b *testing.B) {
	for b.Loop() {
		bn := newBenchDir(b)
		cmd := exec.Command(jobqBin, bn.queue, "worker", "--wait", "-q")
		cmd.Env = bn.env
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(procKiB(b, status, "VmRSS:")/1024, "MiB-RSS")
		b.ReportMetric(procKiB(b, status, "VmHWM:")/1024, "MiB-peak-RSS")
	}
}

// BenchmarkPerTaskOverhead compares the worker's time per `true` task with
// a bare loop running `bash -c true`. The worker's time per task is the
// difference between draining 2N and N tasks, divided by N, which removes
// the fixed start-up and empty-queue exit costs. Each figure is the median
// of seven rounds, interleaved so that load from other processes hits both
// sides alike.
func BenchmarkPerTaskOverhead(b *testing.B) {
	const n, rounds = 300, 7
	drain := func(tasks int) time.Duration {
		bn := newBenchDir(b)
		var in strings.Builder
		for i := range tasks {
			fmt.Fprintf(&in, "true # %d\n", i)
		}
		push := exec.Command(jobqBin, bn.queue, "push", "-q")
		push.Env, push.Stdin = bn.env, strings.NewReader(in.String())
		if out, err := push.CombinedOutput(); err != nil {
			b.Fatalf("push: %v\n%s", err, out)
		}
		w := exec.Command(jobqBin, bn.queue, "worker", "-q")
		w.Env = bn.env
		start := time.Now()
		if out, err := w.CombinedOutput(); err != nil {
			b.Fatalf("worker: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	for b.Loop() {
		var bare, work []time.Duration
		for range rounds {
			start := time.Now()
			for range n {
				if err := exec.Command("bash", "-c", "true").Run(); err != nil {
					b.Fatal(err)
				}
			}
			bare = append(bare, time.Since(start)/n)
			one, two := drain(n), drain(2*n)
			work = append(work, (two-one)/n)
		}
		barePer, workerPer := median(bare), median(work)
		b.ReportMetric(float64(barePer.Microseconds())/1000, "ms/task-bare")
		b.ReportMetric(float64(workerPer.Microseconds())/1000, "ms/task-worker")
		b.ReportMetric(100*(float64(workerPer)/float64(barePer)-1), "%-overhead")
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

type benchDir struct {
	queue string
	env   []string
}

func newBenchDir(b *testing.B) benchDir {
	dir := b.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBQ_") {
			env = append(env, kv)
		}
	}
	return benchDir{queue: "sqlite://" + filepath.Join(dir, "q.db") + "?queue=bench", env: env}
}

func procKiB(b *testing.B, status []byte, field string) float64 {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return v
		}
	}
	b.Fatalf("%s not in /proc status", field)
	return 0
}
