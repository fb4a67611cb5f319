// Command fleet simulates a fleet of jobq worker processes on one queue and
// reports the engine connections, the engine's CPU with the fleet idle, the
// drain rate, and whether any task was lost or ran twice.
//
//	go run ./tools/fleet -engine postgres -workers 200 -tasks 20000
//	go run ./tools/fleet -engine postgres -workers 4 -n 50 -tasks 20000
//	go run ./tools/fleet -engine redis -workers 200 -tasks 20000
//
// On Postgres the workers go through a pgbouncer (Debian's; see
// .ci/install-pgbouncer.sh) in transaction pooling mode with -server-conns
// server connections, or, with -direct, to the server itself. Each task is
// a shell command appending its number to a log file. With -rate the tasks
// are pushed one at a time at that rate, and the engine's CPU per task is
// reported, over the whole run and over the tasks run after the first half
// (the steady state, past the first use of each server process):
//
//	go run ./tools/fleet -engine redis -workers 200 -tasks 2000 -rate 100
//	go run ./tools/fleet -engine postgres -direct -workers 20 -tasks 500 -rate 50
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"
)

func main() {
	var o Options
	flag.StringVar(&o.Engine, "engine", "postgres", "postgres (through pgbouncer) or redis")
	flag.StringVar(&o.Server, "server", "", "the engine's URL (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable or redis://127.0.0.1:6379/0)")
	flag.StringVar(&o.Params, "params", "", "extra queue URL parameters, such as poll=200ms")
	flag.IntVar(&o.ServerConns, "server-conns", 20, "pgbouncer's default_pool_size: server connections for the whole fleet")
	flag.BoolVar(&o.Direct, "direct", false, "postgres: the workers connect to the server directly, without pgbouncer, and LISTEN (about 50 fit Postgres's default max_connections)")
	flag.StringVar(&o.Jobq, "jobq", "", "the jobq binary (default: go build one)")
	flag.IntVar(&o.Workers, "workers", 200, "worker processes")
	flag.IntVar(&o.Handlers, "n", 1, "tasks each worker runs at once")
	flag.IntVar(&o.Tasks, "tasks", 20000, "tasks to push and drain")
	flag.DurationVar(&o.Idle, "idle", 10*time.Second, "how long the idle fleet is measured before the push (0: skip)")
	flag.Float64Var(&o.Rate, "rate", 0, "push the tasks one at a time at this many per second (0: all at once, with jobq push)")
	timeout := flag.Duration("timeout", 30*time.Minute, "give up after this long")
	flag.Parse()
	if o.Server == "" {
		o.Server = map[string]string{"postgres": "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "redis": "redis://127.0.0.1:6379/0"}[o.Engine]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o Options) error {
	cfg, cleanup, err := setup(ctx, o)
	if err != nil {
		return err
	}
	defer cleanup()
	rep, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("engine=%s %s\n", o.Engine, rep)
	if rep.Lost > 0 || rep.Left > 0 {
		return fmt.Errorf("fleet: %d tasks lost, %d left in the queue", rep.Lost, rep.Left)
	}
	return nil
}
