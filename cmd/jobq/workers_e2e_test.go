package main_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// workerRow is one worker in `jobq QUEUE workers --json`.
type workerRow struct {
	ID        string   `json:"id"`
	State     string   `json:"state"`
	Host      string   `json:"host"`
	PID       int      `json:"pid"`
	Tasks     []string `json:"tasks"`
	RSSBytes  int64    `json:"rss_bytes"`
	IntervalS float64  `json:"interval_s"`
}

// workers runs `workers --json` with args and returns the workers by PID.
func (b *bench) workers(args ...string) map[int]workerRow {
	b.t.Helper()
	r := b.must(append([]string{"workers", "--json"}, args...)...)
	var rows []workerRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		b.t.Fatalf("workers --json: %v: %s", err, r.stdout)
	}
	m := map[int]workerRow{}
	for _, w := range rows {
		m[w.PID] = w
	}
	return m
}

// until polls cond for up to 30s.
func (b *bench) until(what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWorkersListsLiveWithdrawnAndVanished: a running worker is listed live
// with its task; one stopped with SIGTERM withdraws (listed only with
// --all); one killed with SIGKILL is listed as vanished once --ttl has
// passed without a heartbeat.
func TestWorkersListsLiveWithdrawnAndVanished(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.must("push", "-c", `echo $$ > started; exec sleep 60`)
	killed := b.start(nil, "worker", "--wait", "--registry-interval", "200ms", "--visibility-timeout", "1m")
	killed.waitFor("task started")
	termed := b.start(nil, "worker", "--wait", "--registry-interval", "200ms")
	kpid, tpid := killed.cmd.Process.Pid, termed.cmd.Process.Pid
	t.Cleanup(func() {
		if lines := readLines(t, filepath.Join(b.dir, "started")); len(lines) > 0 {
			if pid, err := strconv.Atoi(lines[0]); err == nil {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})

	var ws map[int]workerRow
	b.until("both workers are listed live, the first with its task", func() bool {
		ws = b.workers()
		k, tw := ws[kpid], ws[tpid]
		return k.State == "live" && len(k.Tasks) == 1 && tw.State == "live"
	})
	if k := ws[kpid]; k.Host == "" || k.RSSBytes <= 0 || k.IntervalS != 0.2 {
		t.Errorf("the running worker is listed as %+v; want its host, memory and 0.2s interval", k)
	}
	table := b.must("workers").stdout
	if !strings.Contains(table, "LAST HEARTBEAT") || !strings.Contains(table, strconv.Itoa(kpid)) || !strings.Contains(table, "live") {
		t.Errorf("the workers table does not show the live worker %d:\n%s", kpid, table)
	}

	termed.signal(syscall.SIGTERM)
	if code := termed.wait(); code != 0 {
		t.Fatalf("worker stopped by SIGTERM exited %d:\n%s", code, termed.output())
	}
	if w, ok := b.workers()[tpid]; ok {
		t.Errorf("a worker that exited on SIGTERM is still listed without --all: %+v", w)
	}
	if w := b.workers("--all")[tpid]; w.State != "withdrawn" {
		t.Errorf("with --all, the worker that exited on SIGTERM is %+v; want withdrawn", w)
	}

	killed.signal(syscall.SIGKILL)
	killed.wait()
	b.until("the killed worker is listed as vanished", func() bool {
		return b.workers("--ttl", "1s")[kpid].State == "vanished"
	})
	if w := b.workers("--ttl", "1h")[kpid]; w.State != "live" {
		t.Errorf("with --ttl 1h the killed worker is %+v; want it still counted live", w)
	}
}

// TestWorkersOnBackendWithoutRegistry: the command fails with a message
// naming the feature.
func TestWorkersOnBackendWithoutRegistry(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	b.queue = "mem://e2e?unsupported=worker-registry"
	r := b.run("workers")
	if r.code == 0 || !strings.Contains(r.stderr, "worker-registry") {
		t.Fatalf("workers on a backend without the registry exited %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
