package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jobq/jobq/tools/testkit/pgbouncer"
)

// Options is a fleet run as the command's flags give it.
type Options struct {
	// Engine is "postgres" or "redis".
	Engine string
	// Server is the engine's URL (without a queue).
	Server string
	// Params are extra queue URL parameters, such as poll=200ms.
	Params string
	// ServerConns is PgBouncer's default_pool_size (Postgres).
	ServerConns int
	// Jobq is the jobq binary; empty builds one.
	Jobq string
	// Workers, Handlers, Tasks, Idle and Rate are as in Config.
	Workers, Handlers, Tasks int
	Idle                     time.Duration
	Rate                     float64
	// Direct has Postgres workers connect to the server without pgbouncer.
	Direct bool
}

// setup prepares a run: a temporary directory, the jobq binary, a fresh
// queue, and for Postgres, unless o.Direct, a pgbouncer in transaction mode
// with o.ServerConns server connections. The returned function undoes it.
func setup(ctx context.Context, o Options) (Config, func(), error) {
	if o.Direct && o.Engine != "postgres" {
		return Config{}, nil, errors.New("fleet: -direct is for -engine postgres (the other engines have no bouncer to leave out)")
	}
	dir, err := os.MkdirTemp("", "jobq-fleet")
	if err != nil {
		return Config{}, nil, fmt.Errorf("fleet: %w", err)
	}
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		os.RemoveAll(dir)
	}
	fail := func(err error) (Config, func(), error) {
		cleanup()
		return Config{}, nil, err
	}
	cfg := Config{Jobq: o.Jobq, Workers: o.Workers, Handlers: o.Handlers, Tasks: o.Tasks, Idle: o.Idle, Rate: o.Rate, Dir: dir}
	if cfg.Jobq == "" {
		cfg.Jobq = filepath.Join(dir, "jobq")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", cfg.Jobq, "github.com/jobq/jobq/cmd/jobq").CombinedOutput(); err != nil {
			return fail(fmt.Errorf("fleet: go build jobq: %w: %s", err, out))
		}
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	queue := "fleet_" + hex.EncodeToString(suffix[:])

	u, err := url.Parse(o.Server)
	if err != nil {
		return fail(fmt.Errorf("fleet: -server: %w", err))
	}
	q := u.Query()
	q.Set("queue", queue)
	extra, err := url.ParseQuery(o.Params)
	if err != nil {
		return fail(fmt.Errorf("fleet: -params: %w", err))
	}
	for k, vs := range extra {
		q[k] = vs
	}
	qu := *u
	qu.RawQuery = q.Encode()
	cfg.Queue = qu.String()
	switch {
	case o.Engine == "postgres" && o.Direct:
		cfg.Engine = directPostgres{server: o.Server}
	case o.Engine == "postgres":
		// Each worker holds up to its pool's size in client connections:
		// -n + 1, at least 2, at most 10 (jobq worker sizes it).
		b, err := pgbouncer.Start(o.Server, o.ServerConns, o.Workers*10+50)
		if err != nil {
			return fail(err)
		}
		undo = append(undo, b.Stop)
		q.Set("pgbouncer", "true")
		qu.Host = b.Addr
		qu.RawQuery = q.Encode()
		cfg.Queue = qu.String()
		admin := *u
		admin.Host, admin.Path, admin.RawQuery = b.Addr, "/pgbouncer", ""
		cfg.Engine = bouncedPostgres{admin: admin.String(), server: o.Server, bouncerPid: b.Pid()}
	case o.Engine == "redis":
		eu := *u
		eu.RawQuery = ""
		e, err := newRedisEngine(ctx, eu.String())
		if err != nil {
			return fail(err)
		}
		undo = append(undo, func() { e.c.Close() })
		cfg.Engine = e
	default:
		return fail(fmt.Errorf("fleet: -engine %q: use postgres or redis", o.Engine))
	}
	undo = append(undo, func() {
		// Remove the queue's leftovers (none when nothing was lost).
		c := exec.Command(cfg.Jobq, cfg.Queue, "clear", "--yes")
		_ = c.Run()
	})
	return cfg, cleanup, nil
}
