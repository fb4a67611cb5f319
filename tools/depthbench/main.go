// Command depthbench measures a queue at depth: it pushes a backlog of -n
// tasks in batches, then drains it with one worker, and reports
//
//   - the drain rate at a small backlog (-window tasks pushed, then
//     drained, after a warm-up of a tenth of that), the yardstick;
//   - the push rate per tenth of the backlog;
//   - the bytes each queued task costs the engine: Postgres, the total size
//     of the jobq tables (pg_total_relation_size, a schema of its own);
//     Redis, used_memory; SQLite, the database file and its WAL;
//   - the drain rate of the first, middle and last -window tasks;
//   - for the yardstick and each window, the process's CPU time and the
//     bytes it wrote and read through system calls, per task (for SQLite,
//     which runs in the process, the engine's cost: WAL frames, checkpoint
//     copies and pages read past its cache); with -cpuprofile-prefix, a
//     CPU profile of each (compare them with go tool pprof -diff_base);
//   - the size right after the drain, and then every few seconds until the
//     queue's storage is back to a quarter of its peak or -reclaim has
//     passed (the worker stays up, waiting on the empty queue, as a fleet
//     would).
//
// Every size is split into the queue's own storage and the result records
// of the tasks that ended (docs/results.md), which the queue keeps for its
// retention: Postgres, the results table with its indexes; SQLite, the
// pages of jobq_results and its indexes (the dbstat table; the free pages
// count as the queue's); Redis, MEMORY USAGE of the record buckets. The
// bytes per queued task and the reclaim watch are the queue's storage;
// the records are reported beside it, with their bytes per record.
//
// Run it on one backend at a time, on a scratch server:
//
//	go run ./tools/depthbench -backend postgres -n 1000000
//	go run ./tools/depthbench -backend redis -n 1000000
//	go run ./tools/depthbench -backend sqlite -n 1000000
//
// Postgres runs in a new schema, dropped at the end; Redis in a new queue
// whose keys are deleted at the end; SQLite in a new file in a temporary
// directory. -url points it at another server (its queue=, schema= and
// prefix= are replaced).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.backend, "backend", "", "postgres, redis or sqlite")
	flag.StringVar(&cfg.url, "url", "", "the server's URL (default: the local Postgres or Redis; SQLite: a temporary file)")
	flag.IntVar(&cfg.n, "n", 1_000_000, "tasks in the backlog")
	flag.IntVar(&cfg.window, "window", 20_000, "tasks timed at the start, middle and end of the drain, and in the small-backlog yardstick")
	flag.IntVar(&cfg.batch, "batch", 1000, "tasks per PushBatch call")
	flag.IntVar(&cfg.handlers, "handlers", 16, "the draining worker's concurrency")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile-prefix", "", "write a CPU profile of the small-backlog drain and of each window to PREFIX-{yardstick,first,middle,last}.pprof")
	flag.DurationVar(&cfg.reclaim, "reclaim", 5*time.Minute, "how long to watch the size after the drain (0: not at all)")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "depthbench:", err)
		os.Exit(1)
	}
}

// config is what one run measures.
type config struct {
	backend  string
	url      string
	n        int
	window   int
	batch    int
	handlers int
	reclaim  time.Duration
	// cpuProfile, when set, is the path prefix of the drains' CPU profiles.
	cpuProfile string
}

// check reports the first setting a run cannot work with.
func (c config) check() error {
	switch {
	case c.backend != "postgres" && c.backend != "redis" && c.backend != "sqlite":
		return fmt.Errorf("-backend %q: want postgres, redis or sqlite", c.backend)
	case c.window < 1 || c.batch < 1 || c.handlers < 1:
		return errors.New("-window, -batch and -handlers must be at least 1")
	case c.n < 3*c.window:
		return fmt.Errorf("-n %d is less than three windows of %d; lower -window or raise -n", c.n, c.window)
	case c.reclaim < 0:
		return errors.New("-reclaim must not be negative")
	}
	return nil
}

// loadAverage is the machine's 1, 5 and 15 minute load averages as
// /proc/loadavg gives them, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) == 0 {
		return "unknown"
	}
	var one, five, fifteen string
	if _, err := fmt.Sscan(string(b), &one, &five, &fifteen); err != nil {
		return "unknown"
	}
	return one + " " + five + " " + fifteen
}

// mb formats a byte count in MB (10^6), as the figures are quoted.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// printf writes to the report, ignoring errors (stdout).
func printf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
